INSERT INTO lease_steps
    (namespace, execution_id, step_key, step_attempt, done, response, token)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (namespace, execution_id, step_key, step_attempt) DO NOTHING
