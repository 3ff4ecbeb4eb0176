SELECT priority FROM lease_executions
INDEXED BY lease_executions_claim_waiting
WHERE namespace = ?1 AND status <> 'running' AND claimable_at IS NOT NULL AND priority < ?2
ORDER BY priority DESC LIMIT 1
