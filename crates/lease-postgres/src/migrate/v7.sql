-- lease-postgres schema version 7: split claim indexes, so a claim's cost does not grow
-- with the leases running.
--
-- Version 2's one index listed every row with a claimable_at by (sort_due, id), running rows
-- included: a running row keeps the due time it was claimed at, so every claim walked past
-- every live lease (its claimable_at, the lease's expiry plus the redelivery delay, is in the
-- future) before reaching a claimable row. Measured with 10,000 leases running: 10,000 index
-- entries and heap rows read per claim of one.
--
-- Now the claim reads two partial indexes and merges them in (sort_due, id) order:
--
-- * executions_claim_waiting: rows that are not running (admitted or suspended) and have a
--   claimable_at, by (sort_due, id). Walked by due up to now with claimable_at <= now as a
--   filter; the only rows walked past are those waiting out a redelivery delay.
-- * executions_claim_expired: running rows by claimable_at. A live lease's claimable_at is
--   in the future, so a range scan up to now reads only expired leases past their delay, the
--   rows a claim can take; those are sorted by (sort_due, id).
--
-- Terminal rows have no claimable_at and are in neither. executions_horizon (version 3)
-- still serves the claim's summary row.

CREATE INDEX CONCURRENTLY executions_claim_waiting ON {s}.executions (sort_due, id)
    WHERE claimable_at IS NOT NULL AND status <> 'running';

CREATE INDEX CONCURRENTLY executions_claim_expired ON {s}.executions (claimable_at)
    WHERE claimable_at IS NOT NULL AND status = 'running';

DROP INDEX CONCURRENTLY {s}.executions_sort_due;
