SELECT execution_id, step_key, step_attempt, done, response, token FROM lease_steps
WHERE namespace = ?1 AND execution_id = ?2
ORDER BY step_key, step_attempt
