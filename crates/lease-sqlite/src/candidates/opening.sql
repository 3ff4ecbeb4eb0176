SELECT
    (SELECT last_token FROM lease_counters WHERE namespace = ?1),
    EXISTS (SELECT 1 FROM lease_paused WHERE namespace = ?1),
    EXISTS (SELECT 1 FROM lease_limits WHERE namespace = ?1),
    (SELECT priority FROM lease_executions
     INDEXED BY lease_executions_claim_waiting
     WHERE namespace = ?1 AND status <> 'running' AND claimable_at IS NOT NULL
     ORDER BY priority DESC LIMIT 1),
    EXISTS (SELECT 1 FROM lease_executions
     INDEXED BY lease_executions_claim_running
     WHERE namespace = ?1 AND status = 'running' AND claimable_at <= ?2),
    EXISTS (SELECT 1 FROM lease_rate_limits WHERE namespace = ?1),
    EXISTS (SELECT 1 FROM lease_ordered_keys WHERE namespace = ?1)
