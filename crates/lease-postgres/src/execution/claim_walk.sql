-- The key gate's walk (issue 21 item 4; run by `gate.rs` inside its transaction, READ
-- COMMITTED, once per round): `$1 request now, $2 clock, $3 limit, $4 ids text[] (walked by
-- an earlier round: left out), $5 wait?` -> the ids of the candidates it locked, in claim
-- order (priority DESC, due, id), each with whether this transaction may take it (no key,
-- no limit on its key, or its key's lock is held).
--
-- The candidates are `claim.sql`'s (`claim_candidates.sql`, locked `FOR UPDATE SKIP
-- LOCKED`, at most n per side) minus the rows whose key is already at its limit in this
-- statement's snapshot, so a claim is not filled up by a saturated key's rows. Then, for
-- every key among them that a limit applies to, it takes the transaction-scoped advisory
-- lock (hash of the schema, hash of the key): in the first round (`$5` true) waiting, in
-- ascending lock order; in later rounds only trying (`pg_try_advisory_xact_lock`; a key
-- whose lock another claim holds is left to that claim). So every claim that waits for
-- key locks takes them in one statement in one order, and nothing waits for a row lock
-- while holding a key lock (rows are locked with SKIP LOCKED; `claim_gated.sql` writes only
-- rows this transaction locked): claims cannot deadlock. The count happens in the next
-- statement, whose snapshot is taken after the locks were granted, so it sees every lease
-- of the key's previous lock holder, which committed before releasing the lock.
WITH RECURSIVE clk AS MATERIALIZED (
    SELECT LEAST($1::bigint, COALESCE($2::bigint, {now})) AS now
),
{candidates},
walked AS MATERIALIZED (
    SELECT e.id, e.priority, e.due, e.concurrency_key, {key_cap} AS cap
    FROM (
        SELECT u.id, u.priority, u.due, u.key AS concurrency_key
        FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired) u
    ) e
),
lock_ids AS MATERIALIZED (
    SELECT DISTINCT hashtext(w.concurrency_key) AS lock_id FROM walked w
    WHERE w.cap IS NOT NULL
),
waited AS MATERIALIZED (
    SELECT k.lock_id, pg_advisory_xact_lock(hashtext('{s}'), k.lock_id) IS NOT NULL AS held
    FROM (SELECT l.lock_id FROM lock_ids l WHERE $5::boolean ORDER BY l.lock_id OFFSET 0) k
),
tried AS MATERIALIZED (
    SELECT l.lock_id, pg_try_advisory_xact_lock(hashtext('{s}'), l.lock_id) AS held
    FROM lock_ids l WHERE NOT $5::boolean
),
held AS MATERIALIZED (
    SELECT w.lock_id FROM waited w WHERE w.held
    UNION ALL
    SELECT t.lock_id FROM tried t WHERE t.held
)
SELECT w.id,
    (w.cap IS NULL OR hashtext(w.concurrency_key) IN (SELECT h.lock_id FROM held h)) AS may_take
FROM walked w
ORDER BY w.priority DESC, w.due, w.id
