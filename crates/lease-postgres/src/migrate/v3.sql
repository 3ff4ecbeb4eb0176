-- lease-postgres schema version 3: the claim reports the next claimable instant.
--
-- The claim statement returns, with its leases, the earliest claimable_at over the schema's
-- non-terminal executions after the claim, so an idle dispatcher sleeps until exactly then.
-- This index (the same shape as version 1's executions_claimable_at, which version 2
-- dropped) makes that one seek from the smallest value (skipping only the rows the claim
-- itself picked) instead of a scan. Rows that are terminal or not due have claimable_at NULL
-- and are not indexed.

CREATE INDEX CONCURRENTLY executions_horizon ON {s}.executions (claimable_at)
    WHERE claimable_at IS NOT NULL;
