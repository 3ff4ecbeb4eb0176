-- Serialises migrations of one schema across processes: `$1` the lock's name, hashed into a
-- transaction-scoped advisory lock key.
SELECT pg_advisory_xact_lock(hashtextextended($1, 0))
