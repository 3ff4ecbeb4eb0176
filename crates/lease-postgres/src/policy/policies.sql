-- `` -> (key, ordered, rate starts, rate period ms) of every row of `key_policies`: the
-- namespace default (key NULL) first, then keys by name (byte order, the "C" collation).
SELECT p.key, p.ordered, p.rate_starts, p.rate_period_ms
FROM {s}.key_policies p ORDER BY p.key NULLS FIRST
