-- The cost counters of a run (for the cost per job): transaction ids assigned so far (read, not
-- assigned: this statement takes none) and the WAL position.
SELECT pg_snapshot_xmax(pg_current_snapshot())::text, pg_current_wal_lsn()::text
