-- `` -> (key, limit) of the stored concurrency limits: the namespace default (key NULL)
-- first, then keys by name (byte order, the "C" collation).
SELECT l.key, l.max_leases FROM {s}.concurrency_limits l ORDER BY l.key NULLS FIRST
