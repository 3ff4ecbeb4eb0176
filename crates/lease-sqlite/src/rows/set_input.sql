UPDATE lease_executions SET input = ?3 WHERE namespace = ?1 AND id = ?2
