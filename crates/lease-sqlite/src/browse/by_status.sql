SELECT admitted_seq, rowid FROM lease_executions
INDEXED BY lease_executions_by_status
WHERE namespace = ?1 AND admitted_seq < ?2 AND status = ?4
ORDER BY admitted_seq DESC LIMIT ?3
