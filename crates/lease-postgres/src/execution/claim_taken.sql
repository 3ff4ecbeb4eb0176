-- The leases the key gate's claim is issuing for the row `e`'s key, spliced as
-- `key_full.sql`'s `{taken}` in `claim_unblocked.sql`.
(SELECT count(*) FROM picked p WHERE p.key = e.concurrency_key)
