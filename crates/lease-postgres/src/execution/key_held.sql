-- Whether the row `e` is held back by its key's ordering or start rate (schema v16), as
-- this statement's snapshot sees the key plus `{taken}` (the leases the statement itself
-- is issuing for the key), spliced as `{key_held}`:
--
-- - ordered key: the statement takes one of the key, or the key holds a live lease
--   (`executions_live_by_key`), or an execution of the key admitted earlier is neither
--   terminal nor dead (one seek of `executions_key_line`; a running last attempt whose
--   lease expired is dead, as `get` reads it);
-- - rate: the key's claim instants in (now - period, now] (at most `starts` read, on
--   `key_starts_by_key`) plus `{taken}` reach `starts`.
--
-- The first test is an uncorrelated subquery (run once per statement): with no policy
-- stored no row pays a probe. The snapshot can be behind a concurrent claim's commit: the
-- keyed claim checks again after the key's bucket lock (`key_room`, schema v16).
(e.concurrency_key IS NOT NULL AND (SELECT EXISTS (SELECT 1 FROM {s}.key_policies)) AND (
    SELECT (pol.ordered AND ({taken} > 0
            OR EXISTS (
                SELECT 1 FROM {s}.executions x
                WHERE x.concurrency_key = e.concurrency_key AND x.status = 'running'
                  AND x.lease_expires_at > (SELECT now FROM clk))
            OR EXISTS (
                SELECT 1 FROM {s}.executions x
                WHERE x.concurrency_key = e.concurrency_key
                  AND x.status IN ('admitted', 'running', 'suspended')
                  AND x.admission_seq < e.admission_seq
                  AND NOT (x.status = 'running' AND x.attempt_limit IS NOT NULL
                      AND x.unacknowledged_deliveries + 1 >= x.attempt_limit
                      AND x.lease_expires_at <= (SELECT now FROM clk)))))
        OR (pol.starts IS NOT NULL AND {taken} + (
            SELECT count(*) FROM (
                SELECT 1 FROM {s}.key_starts r
                WHERE r.key = e.concurrency_key AND r.at > (SELECT now FROM clk) - pol.period
                LIMIT pol.starts) z) >= pol.starts)
    FROM {key_policy} pol))
