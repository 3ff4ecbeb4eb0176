-- The concurrency limit of the row `e`'s key, spliced as `{key_cap}`: the key's own limit,
-- else the namespace default, NULL for no key or no limit (unlimited). Two probes of the
-- small `concurrency_limits` table (unique on key).
COALESCE(
    (SELECT l.max_leases FROM {s}.concurrency_limits l WHERE l.key = e.concurrency_key),
    (SELECT l.max_leases FROM {s}.concurrency_limits l
     WHERE l.key IS NULL AND e.concurrency_key IS NOT NULL))
