INSERT INTO lease_attempt_limits (namespace, workflow, value) VALUES (?1, ?2, ?3)
ON CONFLICT (namespace, workflow) DO UPDATE SET value = excluded.value
