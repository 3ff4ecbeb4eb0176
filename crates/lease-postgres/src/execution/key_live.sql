-- The live leases of the row `e`'s key, spliced as `{key_live}`: running rows of the key
-- whose lease expires after the statement's clock (`clk`), as the statement's snapshot sees
-- them. One range of `executions_live_by_key (concurrency_key, lease_expires_at)` (schema
-- v9); an expired lease frees its place by itself.
(SELECT count(*) FROM {s}.executions x
 WHERE x.concurrency_key = e.concurrency_key AND x.status = 'running'
   AND x.lease_expires_at > (SELECT now FROM clk))
