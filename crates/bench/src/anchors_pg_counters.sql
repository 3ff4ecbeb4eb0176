-- The cost counters of a run (issue 24 item 3): transaction ids assigned so far (read, not
-- assigned: this statement takes none) and the WAL position.
SELECT pg_snapshot_xmax(pg_current_snapshot())::text, pg_current_wal_lsn()::text
