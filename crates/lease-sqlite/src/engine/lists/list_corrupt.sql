SELECT CAST(id AS TEXT), corrupt FROM lease_executions
WHERE namespace = ?1 AND corrupt IS NOT NULL ORDER BY id LIMIT ?2
