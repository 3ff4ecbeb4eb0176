-- lease-postgres schema version 22: fewer writes per delivery
-- (docs/decisions/0048-postgresql-drain-writes.md).
--
-- No claim or acknowledgement can be a HOT update (each changes the status, which several
-- indexes hold), so each writes a new row version and an entry in every index whose
-- predicate the new version meets. Three changes make that less:
--
-- * fillfactor 50: an admission leaves half of each new page free, so the claim's and the
--   acknowledgement's versions land on the page of the row they replace (the old version's
--   space is reclaimed by page pruning once no snapshot needs it). An update that moves to
--   another page also logs a lock of the old version and references two pages; one that
--   stays logs neither. Applies to pages written from now on.
-- * the horizon index holds only rows that are not running: running rows are already in
--   `executions_claim_expired` by the same column, so the claim's summary row seeks both
--   indexes (`claim_take.sql`), and a claim or renewal writes one index entry fewer. Its
--   status test is in the "C" collation, as only the horizon's statements write it, so no
--   other statement can walk this index and the horizon's statements can walk no other
--   index of waiting rows (a proof of a partial index's predicate needs one collation).
-- * `executions_admitted` (version 16) goes: pages with no filter walk the status index
--   once per status, merged, as pages filtered on a name do, and read the rows by
--   (status, admission number) through `executions_browse_status`. It held an entry for
--   every row version.
ALTER TABLE {s}.executions SET (fillfactor = 50);

CREATE INDEX CONCURRENTLY executions_horizon_waiting ON {s}.executions (claimable_at)
    WHERE claimable_at IS NOT NULL AND status COLLATE "C" <> 'running';

DROP INDEX CONCURRENTLY {s}.executions_horizon;

DROP INDEX CONCURRENTLY {s}.executions_admitted;
