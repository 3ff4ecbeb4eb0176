-- list_steps_page: ?1 namespace, ?2 id, ?3 after step key (NULL: from the start), ?4 after
-- attempt, ?5 limit -> at most ?5 step records strictly after (?3, ?4), by key (BINARY:
-- byte order, as StepKey's Ord) then attempt, over the primary key. The columns are
-- heap.rs's STEP_COLUMNS. The caller asks for one more than its page.
SELECT execution_id, step_key, step_attempt, done, response, token FROM lease_steps
WHERE namespace = ?1 AND execution_id = ?2
  AND (?3 IS NULL OR (step_key, step_attempt) > (?3, ?4))
ORDER BY step_key, step_attempt
LIMIT ?5
