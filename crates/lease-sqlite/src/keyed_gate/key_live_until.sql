SELECT MAX(lease_expires_at) FROM lease_executions
INDEXED BY lease_executions_keyed_live
WHERE namespace = ?1 AND status = 'running' AND concurrency_key = ?2 AND lease_expires_at > ?3
