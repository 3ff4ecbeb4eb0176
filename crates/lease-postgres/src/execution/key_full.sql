-- Whether the row `e`'s key is at its limit, spliced as `{key_full}`: its live leases plus
-- `{taken}` (the leases the statement itself is issuing for the key) reach its limit. False
-- for an unkeyed row and for a key without a limit. The limit is looked up once (`OFFSET 0`
-- keeps the subquery from being flattened, which would splice `{key_cap}`'s two probes in
-- twice) and the count runs only for a limited key (`CASE`). Every scan node here is
-- initialised on every execution of the statement, run or not, so each one saved counts
-- (the keyed claim is to cost little more than the plain claim).
(e.concurrency_key IS NOT NULL AND (
    SELECT CASE WHEN c.cap IS NULL THEN false ELSE {key_live} + {taken} >= c.cap END
    FROM (SELECT {key_cap} AS cap OFFSET 0) c))
