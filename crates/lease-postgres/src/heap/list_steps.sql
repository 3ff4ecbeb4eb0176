-- `$1 id` -> the execution's step records by key, then attempt.
SELECT execution_id, step_key, step_attempt, done, response, token FROM {s}.steps
WHERE execution_id = $1 ORDER BY step_key, step_attempt
