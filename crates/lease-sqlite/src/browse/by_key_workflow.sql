SELECT admitted_seq, rowid FROM lease_executions
INDEXED BY lease_executions_by_key_workflow
WHERE namespace = ?1 AND admitted_seq < ?2 AND status = ?4 AND concurrency_key = ?5
  AND workflow = ?6
ORDER BY admitted_seq DESC LIMIT ?3
