-- The keyed claim (docs/decisions/0021-concurrency-limits.md): `claim.sql` with every
-- concurrency limit checked, in ONE statement. `$1 request now, $2 clock, $3 limit, $4
-- lease ms, $5 delays` (`claim.sql`'s) -> `claim.sql`'s rows (leases in claim order, then
-- the summary row, `gated` false). Run instead of `claim.sql` once a claim met a limited
-- key (`gate.rs`).
--
-- 1. `{candidates}` as in `claim.sql`, leaving out rows whose key is at its limit, or that
--    its ordering or rate holds back, in this statement's snapshot (`{open}`), so a
--    saturated or held key does not fill the claim;
-- 2. `locked`: for every key among them that a limit, an ordering or a rate applies to, the
--    transaction-scoped
--    advisory lock of its bucket (hash of the schema, the key's hash modulo 64), waited
--    for in ascending lock order, at most the stall bound (`lock_timeout`, set first: the
--    lease duration within {stall_min}..{stall_max} ms; a claim that waits longer fails
--    with nothing claimed). Buckets, not keys: every advisory lock takes an entry of the
--    server's shared lock table (sized `max_locks_per_transaction` per connection, and
--    when full every session on the server fails), so one claim holds at most 64 whatever
--    its limit, and a namespace at most 64 at once. A bucket's lock serialises the
--    count-then-claim of every key in it; keys sharing a bucket only wait for each other;
-- 3. `room`: per locked key, what `key_room` (schema v16) allows in a snapshot taken after
--    the lock was granted, so everything the lock's previous holder committed is counted
--    (this statement's own snapshot predates it): its limit minus its live leases
--    (negative after a lowered limit: nothing is taken), for an ordered key one start at
--    most and only of its head (the earliest admitted execution neither terminal nor
--    dead) while no lease of the key is live, for a rate the starts left in its window;
-- 4. `picked`: the candidates in claim order, a keyed one only while it is among the first
--    `room` candidates of its key (a skipped candidate does not stop later ones) and, for
--    an ordered key, its head; the first n of those; `{take}` claims them
--    (`claim_take.sql`), and `recorded` stores the claim's instant once per start of a
--    rate-limited key (the bucket lock, held to the commit, makes the next claim of the
--    key count them).
--
-- A key holding back rows due now after a short claim reports when it may start again
-- (`key_wait`, in the horizon, never later than the truth): for a rate the instant its
-- window has room, for an ordered or limited key the earliest expiry of its live leases
-- (this claim's too). An expiry is earlier than the row's own `claimable_at` (expiry plus
-- redelivery delay), and the next of an ordered line or a waiting row of a full key may
-- start at the expiry. Keys are found among the rows due now that this claim did not take,
-- only while some ordering or rate is stored (with limits alone the claim costs what it did
-- before either existed).
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
    SELECT e.concurrency_key AS key, {key_cap} AS cap, pol.ordered, pol.starts, pol.period
    FROM (SELECT DISTINCT w.key AS concurrency_key FROM walked w WHERE w.key IS NOT NULL) e
    CROSS JOIN LATERAL {key_policy} pol
),
bound AS MATERIALIZED (
    SELECT set_config('lock_timeout',
        LEAST(GREATEST($4::bigint, {stall_min}), {stall_max})::text, true) AS ms
),
locked AS MATERIALIZED (
    SELECT k.lock_id, pg_advisory_xact_lock(hashtext('{s}'), k.lock_id) IS NOT NULL AS held
    FROM (
        SELECT DISTINCT hashtext(l.key) & 63 AS lock_id FROM limited l, bound b
        WHERE (l.cap IS NOT NULL OR l.ordered OR l.starts IS NOT NULL) AND b.ms IS NOT NULL
        ORDER BY lock_id OFFSET 0
    ) k
),
gate AS MATERIALIZED (
    SELECT l.key, l.starts,
        {s}.key_room(l.key, (SELECT now FROM clk), l.cap, l.ordered, l.starts, l.period) AS g
    FROM limited l
    WHERE (l.cap IS NOT NULL OR l.ordered OR l.starts IS NOT NULL)
      AND (SELECT count(*) FROM locked) >= 0
),
room AS MATERIALIZED (
    SELECT g.key, g.starts, (g.g).room AS room, (g.g).head AS head FROM gate g
),
ranked AS MATERIALIZED (
    SELECT w.id, w.priority, w.due, w.key, w.ord,
        row_number() OVER (PARTITION BY w.key ORDER BY w.ord) AS rank_in_key
    FROM walked w LEFT JOIN room m ON m.key = w.key
    WHERE m.head IS NULL OR m.head = w.id
),
picked AS MATERIALIZED (
    SELECT r.id, r.priority, r.due, r.key
    FROM ranked r LEFT JOIN room m ON m.key = r.key
    WHERE r.key IS NULL OR m.room IS NULL OR r.rank_in_key <= m.room
    ORDER BY r.ord
    LIMIT $3
),
gated AS MATERIALIZED (SELECT false AS gated),
recorded AS (
    INSERT INTO {s}.key_starts (key, at)
    SELECT p.key, (SELECT now FROM clk) FROM picked p JOIN room m ON m.key = p.key
    WHERE m.starts IS NOT NULL
),
key_wait AS MATERIALIZED (
    SELECT min(LEAST(
        CASE WHEN pol.starts IS NULL THEN NULL
            WHEN t.n >= pol.starts THEN (SELECT now FROM clk) + pol.period
            ELSE (SELECT r.at FROM {s}.key_starts r
                  WHERE r.key = e.concurrency_key
                    AND r.at > (SELECT now FROM clk) - pol.period
                  ORDER BY r.at DESC OFFSET pol.starts - 1 - t.n LIMIT 1) + pol.period
        END,
        CASE WHEN pol.ordered OR {key_cap} IS NOT NULL THEN LEAST(
            CASE WHEN t.n > 0 THEN (SELECT now FROM clk) + $4 END,
            (SELECT min(x.lease_expires_at) FROM {s}.executions x
             WHERE x.concurrency_key = e.concurrency_key AND x.status = 'running'
               AND x.lease_expires_at > (SELECT now FROM clk)))
        END)) AS at
    FROM (
        SELECT DISTINCT x.concurrency_key FROM {s}.executions x
        WHERE (SELECT short FROM short)
          AND (SELECT EXISTS (SELECT 1 FROM {s}.key_policies))
          AND x.claimable_at <= (SELECT now FROM clk) AND x.concurrency_key IS NOT NULL
          AND x.id NOT IN (SELECT p.id FROM picked p)
    ) e
    CROSS JOIN LATERAL {key_policy} pol
    CROSS JOIN LATERAL (SELECT count(*) AS n FROM picked p WHERE p.key = e.concurrency_key) t
),
{take}
