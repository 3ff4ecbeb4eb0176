-- list_steps_page: `$1 id, $2 after step key (NULL: from the start), $3 after attempt, $4
-- limit` -> at most $4 step records strictly after ($2, $3), by key (the column's "C"
-- collation: byte order) then attempt; the primary key serves the range. The caller asks
-- for one more than its page to learn whether more remain.
SELECT execution_id, step_key, step_attempt, done, response, token FROM {s}.steps
WHERE execution_id = $1
  AND ($2::text IS NULL OR (step_key, step_attempt) > ($2::text, $3::bigint))
ORDER BY step_key, step_attempt
LIMIT $4
