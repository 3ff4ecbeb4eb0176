SELECT rowid, id FROM lease_executions
INDEXED BY lease_executions_terminal
WHERE namespace = ?1 AND status IN ('completed', 'failed', 'cancelled') AND corrupt IS NULL
  AND last_delivery_ended_at < ?2
ORDER BY id LIMIT ?3
