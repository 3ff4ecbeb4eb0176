CREATE INDEX lease_executions_terminal
    ON lease_executions (namespace, id, last_delivery_ended_at)
    WHERE status IN ('completed', 'failed') AND corrupt IS NULL;
CREATE INDEX lease_store_receipts_execution
    ON lease_store_receipts (namespace, execution_id);
CREATE INDEX lease_starts_target
    ON lease_starts (namespace, target);
