SELECT claimable_at, workflow, id, concurrency_key FROM lease_executions
INDEXED BY lease_executions_horizon
WHERE namespace = ?1 AND claimable_at IS NOT NULL
ORDER BY claimable_at
