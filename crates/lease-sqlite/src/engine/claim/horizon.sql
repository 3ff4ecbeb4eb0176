SELECT claimable_at FROM lease_executions
WHERE namespace = ?1 AND claimable_at IS NOT NULL
ORDER BY claimable_at LIMIT 1
