-- The status a fenced statement judges the row `e` by (`ExecutionRecord::holds_at`): the
-- stored one, except 'dead' for a running row whose lease expired on its last attempt
-- (`{last_attempt}`), which `get` reads as dead from its expiry on, so its holder is
-- refused from that instant although no claim has stored the death yet. Needs the
-- statement's `clk` CTE; a running row without an expiry counts as expired, as in
-- `effective`.
(CASE WHEN e.status = 'running' AND {last_attempt}
        AND COALESCE(e.lease_expires_at <= (SELECT now FROM clk), true)
    THEN 'dead' ELSE e.status END)
