-- lease-postgres schema version 2: claims walk the (due, id) order directly.
--
-- Version 1 indexed claimable_at, so a claim read EVERY claimable row and sorted them to
-- return the first n by (due, id): O(backlog) per claim. `sort_due` is the effective due time
-- the claim orders by (a running row also counts the wakes requested during its delivery);
-- claimable_at >= sort_due always holds, so the claim scans the (sort_due, id) index up to
-- `now` and stops after n claimable rows, skipping only rows that are due but not claimable
-- (live leases and executions waiting out a redelivery delay).

ALTER TABLE {s}.executions
    ADD COLUMN sort_due bigint GENERATED ALWAYS AS (
        CASE WHEN status = 'running' THEN least(due_at, wake_after_claim) ELSE due_at END
    ) STORED;

CREATE INDEX CONCURRENTLY executions_sort_due ON {s}.executions (sort_due, id)
    WHERE claimable_at IS NOT NULL;

DROP INDEX CONCURRENTLY {s}.executions_claimable_at;
