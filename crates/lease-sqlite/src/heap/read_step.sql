SELECT execution_id, step_key, step_attempt, done, response, token FROM lease_steps
WHERE namespace = ?1 AND execution_id = ?2 AND step_key = ?3 AND step_attempt = ?4
