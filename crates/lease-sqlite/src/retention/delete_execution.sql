DELETE FROM lease_executions WHERE rowid = ?1
