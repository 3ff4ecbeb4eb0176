DROP INDEX lease_executions_claim;
CREATE INDEX lease_executions_claim_waiting
    ON lease_executions (namespace, claim_due_at, id, claimable_at)
    WHERE claimable_at IS NOT NULL AND status <> 'running';
CREATE INDEX lease_executions_claim_running
    ON lease_executions (namespace, claimable_at, claim_due_at, id)
    WHERE claimable_at IS NOT NULL AND status = 'running';
