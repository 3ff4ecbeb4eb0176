SELECT id, workflow, input, status, token, lease_expires_at, due_at, wake_after_claim, unacknowledged, last_delivery_ended_at, ever_suspended, outcome, priority, concurrency_key, trace_context, attempt_limit, last_error, redelivery_policy, rowid, claim_due_at, CAST(id AS TEXT), deliveries, delivery_claimed_at FROM lease_executions
INDEXED BY lease_executions_claim_waiting
WHERE namespace = ?1 AND status <> 'running' AND priority = ?4
  AND claim_due_at <= ?2 AND claimable_at <= ?2
ORDER BY claim_due_at, id LIMIT ?3
