-- The keyed claim (issue 21 item 4; DESIGN "How each backend gates its claims"): `claim.sql`
-- with every concurrency limit checked, in ONE statement. `$1 request now, $2 clock, $3
-- limit, $4 lease ms, $5 delays` (`claim.sql`'s) -> `claim.sql`'s rows (leases in claim
-- order, then the summary row, `gated` false). Run instead of `claim.sql` once a claim met
-- a limited key (`gate.rs`).
--
-- 1. `{candidates}` as in `claim.sql`, leaving out rows whose key is at its limit in this
--    statement's snapshot (`{open}`), so a saturated key does not fill the claim;
-- 2. `locked`: for every key among them that a limit applies to, the transaction-scoped
--    advisory lock of its bucket (hash of the schema, the key's hash modulo 64), waited
--    for in ascending lock order, at most the stall bound (`lock_timeout`, set first: the
--    lease duration within {stall_min}..{stall_max} ms; a claim that waits longer fails
--    with nothing claimed). Buckets, not keys: every advisory lock takes an entry of the
--    server's shared lock table (sized `max_locks_per_transaction` per connection, and
--    when full every session on the server fails), so one claim holds at most 64 whatever
--    its limit, and a namespace at most 64 at once. A bucket's lock serialises the
--    count-then-claim of every key in it; keys sharing a bucket only wait for each other;
-- 3. `room`: per locked key, its limit minus its live leases counted by `live_leases`
--    (schema v12) in a snapshot taken after the lock was granted, so every lease the
--    lock's previous holder committed is counted (this statement's own snapshot predates
--    them); negative after a lowered limit: nothing is taken;
-- 4. `picked`: the candidates in claim order, a keyed one only while it is among the first
--    `room` candidates of its key (a skipped candidate does not stop later ones), the first
--    n of those; `{take}` claims them (`claim_take.sql`).
--
-- Every claim of a limited key runs this statement, which holds the key's bucket lock
-- from the count to its commit, so two claims never count the same free place. Nothing
-- waits for a row lock while holding a bucket lock (rows are locked with SKIP LOCKED,
-- and the update writes only rows this statement locked), and bucket locks are waited for
-- in one order: claims cannot deadlock. The locks live inside one statement on the server, so no client
-- can hold them while frozen. A short claim's horizon leaves out rows due now whose key
-- is at its limit after this claim (`{unblocked}`; a full claim's does not look at keys:
-- `claim_take.sql`); a claim that comes back short while the horizon says "now" (a key
-- filled up during it) is run again by `gate.rs`.
WITH RECURSIVE clk AS MATERIALIZED (
    SELECT LEAST($1::bigint, COALESCE($2::bigint, {now})) AS now
),
{candidates},
walked AS MATERIALIZED (
    SELECT u.id, u.priority, u.due, u.key,
        row_number() OVER (ORDER BY u.priority DESC, u.due, u.id) AS ord
    FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired) u
),
limited AS MATERIALIZED (
    SELECT e.concurrency_key AS key, {key_cap} AS cap
    FROM (SELECT DISTINCT w.key AS concurrency_key FROM walked w WHERE w.key IS NOT NULL) e
),
bound AS MATERIALIZED (
    SELECT set_config('lock_timeout',
        LEAST(GREATEST($4::bigint, {stall_min}), {stall_max})::text, true) AS ms
),
locked AS MATERIALIZED (
    SELECT k.lock_id, pg_advisory_xact_lock(hashtext('{s}'), k.lock_id) IS NOT NULL AS held
    FROM (
        SELECT DISTINCT hashtext(l.key) & 63 AS lock_id FROM limited l, bound b
        WHERE l.cap IS NOT NULL AND b.ms IS NOT NULL
        ORDER BY lock_id OFFSET 0
    ) k
),
room AS MATERIALIZED (
    SELECT l.key, l.cap - {s}.live_leases(l.key, (SELECT now FROM clk)) AS room
    FROM limited l
    WHERE l.cap IS NOT NULL AND (SELECT count(*) FROM locked) >= 0
),
ranked AS MATERIALIZED (
    SELECT w.id, w.priority, w.due, w.key, w.ord,
        row_number() OVER (PARTITION BY w.key ORDER BY w.ord) AS rank_in_key
    FROM walked w
),
picked AS MATERIALIZED (
    SELECT r.id, r.priority, r.due, r.key
    FROM ranked r LEFT JOIN room m ON m.key = r.key
    WHERE r.key IS NULL OR m.room IS NULL OR r.rank_in_key <= m.room
    ORDER BY r.ord
    LIMIT $3
),
gated AS MATERIALIZED (SELECT false AS gated),
{take}
