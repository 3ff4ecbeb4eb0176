SELECT corrupt FROM lease_executions WHERE namespace = ?1 AND id = ?2
