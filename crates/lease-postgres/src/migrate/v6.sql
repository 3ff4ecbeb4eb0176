-- lease-postgres schema version 6: retention (`purge_terminal`).
--
-- A purge takes the terminal executions acknowledged before a cutoff, oldest first: this
-- partial index holds only terminal rows, by the instant of their terminal acknowledgement
-- (`last_delivery_ended_at`) then id, so a purge batch is one index range scan that stops
-- after `limit` rows however many live executions the table holds. The two other indexes
-- let the same statement delete the store receipts and start records naming the purged
-- executions without scanning those tables (their primary keys do not lead with the
-- execution id).

CREATE INDEX CONCURRENTLY executions_terminal ON {s}.executions (last_delivery_ended_at, id)
    WHERE status IN ('completed', 'failed');

CREATE INDEX CONCURRENTLY store_receipts_execution ON {s}.store_receipts (execution_id);

CREATE INDEX CONCURRENTLY start_requests_target ON {s}.start_requests (target);
