SELECT MAX(lease_expires_at) FROM lease_executions
INDEXED BY lease_executions_by_key
WHERE namespace = ?1 AND concurrency_key = ?2 AND status = 'running' AND lease_expires_at > ?3
