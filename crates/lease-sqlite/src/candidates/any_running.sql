SELECT 1 FROM lease_executions
INDEXED BY lease_executions_claim_running
WHERE namespace = ?1 AND status = 'running' AND claimable_at <= ?2 LIMIT 1
