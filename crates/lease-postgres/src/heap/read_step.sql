-- `$1 id, $2 step key, $3 attempt` -> one step record.
SELECT execution_id, step_key, step_attempt, done, response, token FROM {s}.steps
WHERE execution_id = $1 AND step_key = $2 AND step_attempt = $3
