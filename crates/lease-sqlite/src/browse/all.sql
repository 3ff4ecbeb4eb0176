SELECT admitted_seq, rowid FROM lease_executions
INDEXED BY lease_executions_admitted
WHERE namespace = ?1 AND admitted_seq < ?2
ORDER BY admitted_seq DESC LIMIT ?3
