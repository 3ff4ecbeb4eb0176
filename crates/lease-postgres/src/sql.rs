//! Every SQL statement the backend runs, rendered once per schema at connect time.
//!
//! Templates name the schema `{s}` (replaced by the quoted, validated schema name), the
//! database clock `{now}` and the execution columns `{cols}`. Statements that read the clock
//! take a nullable `$clock` parameter: a value when a manual clock is injected, otherwise
//! NULL and the database's `clock_timestamp()` (not `now()`, which is the transaction's start
//! and would be stale after a lock wait) is used. Each operation is one statement, hence one
//! round trip and one atomic step, except the store update (one short transaction).
//!
//! Fencing (design.md section 3): every fenced statement first locks the execution row in a
//! CTE (`FOR SHARE` for step writes, `FOR NO KEY UPDATE` for acknowledge, renew and release).
//! Both modes conflict with the claim's `FOR UPDATE SKIP LOCKED`, so no claim can commit
//! between the check and the write. In READ COMMITTED a locking read that finds the row
//! changed since the statement's snapshot waits for the lock and returns the row's *newest*
//! version, so the token and status the statement compares are the ones current after the
//! lock was granted, and the write commits before any later claim can lock the row.
//! `acknowledge_batch` does the same for all its rows in one statement, locking them in id
//! order so that two batches sharing rows wait for each other instead of deadlocking.

use std::sync::Arc;

/// The database clock in milliseconds since the Unix epoch.
const DB_NOW: &str = "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint";

/// The execution columns, in the order [`crate::rows::execution`] decodes them.
const COLS: &str = "e.id, e.workflow, e.input, e.status, e.token, e.lease_expires_at, e.due_at, \
     e.wake_after_claim, e.unacknowledged_deliveries, e.last_delivery_ended_at, \
     e.ever_suspended, e.outcome";

/// `$1 id, $2 workflow, $3 input, $4 clock, $5 not_before (NULL: due now)` -> the record
/// (created or existing), now, and the notification count. No row: the id was inserted by a
/// transaction that committed after this statement's snapshot; run it again. A created row
/// notifies its due time (= its `claimable_at`); an existing one nothing.
const ADMIT: &str = r#"
WITH clk AS MATERIALIZED (SELECT COALESCE($4::bigint, {now}) AS now),
ins AS (
    INSERT INTO {s}.executions AS e
        (id, workflow, input, status, token, due_at, unacknowledged_deliveries,
         ever_suspended, claimable_at)
    SELECT $1, $2, $3, 'admitted', 0, COALESCE($5::bigint, clk.now), 0, false,
        COALESCE($5::bigint, clk.now)
    FROM clk
    ON CONFLICT (id) DO NOTHING
    RETURNING {cols}, e.claimable_at
),
note AS MATERIALIZED ({notify} FROM ins HAVING count(*) > 0)
SELECT {cols}, clk.now, (SELECT count(*) FROM note) FROM ins e, clk
UNION ALL
SELECT {cols}, clk.now, 0 FROM {s}.executions e, clk
WHERE e.id = $1 AND NOT EXISTS (SELECT 1 FROM ins)
"#;

/// `$1 ids text[], $2 workflows text[], $3 inputs text[], $4 not_befores bigint[] (NULL:
/// due now), $5 clock` -> one row per item whose record this statement can see: (item
/// number from 1, the 12 execution columns, now, notification count), by item. The ids
/// must be distinct (`check_admit_batch`). [`ADMIT`] for every item in one statement:
/// rows are inserted in id order (two batches sharing ids wait instead of deadlocking),
/// an existing id is returned as stored. A missing item was inserted by a transaction that
/// committed after this statement's snapshot; run the statement again for it. One
/// notification: the earliest due time among the created rows.
const ADMIT_BATCH: &str = r#"
WITH clk AS MATERIALIZED (SELECT COALESCE($5::bigint, {now}) AS now),
items AS MATERIALIZED (
    SELECT u.ord, u.id, u.workflow, u.input, COALESCE(u.not_before, clk.now) AS due
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
        WITH ORDINALITY AS u(id, workflow, input, not_before, ord), clk
),
ins AS (
    INSERT INTO {s}.executions AS e
        (id, workflow, input, status, token, due_at, unacknowledged_deliveries,
         ever_suspended, claimable_at)
    SELECT i.id, i.workflow, i.input, 'admitted', 0, i.due, 0, false, i.due
    FROM items i ORDER BY i.id
    ON CONFLICT (id) DO NOTHING
    RETURNING {cols}, e.claimable_at
),
note AS MATERIALIZED ({notify} FROM ins HAVING count(*) > 0),
found AS (
    SELECT {cols} FROM ins e
    UNION ALL
    SELECT {cols} FROM {s}.executions e JOIN items i ON i.id = e.id
    WHERE NOT EXISTS (SELECT 1 FROM ins x WHERE x.id = e.id)
)
SELECT i.ord, {found_cols}, clk.now, (SELECT count(*) FROM note)
FROM items i JOIN found f ON f.id = i.id, clk
ORDER BY i.ord
"#;

/// The execution columns of `admit_batch`'s `found` CTE.
const FOUND_COLS: &str = "f.id, f.workflow, f.input, f.status, f.token, f.lease_expires_at, \
     f.due_at, f.wake_after_claim, f.unacknowledged_deliveries, f.last_delivery_ended_at, \
     f.ever_suspended, f.outcome";

/// The wake-up of a statement (issue 10), as the head of a `note` CTE over the rows it
/// made claimable (`... FROM <rows> [WHERE ...] HAVING ...`): one `pg_notify` on the
/// schema's channel `{chan}` with the earliest `claimable_at` of those rows, in
/// backend-clock milliseconds. Inside the writing statement, so it is sent at its commit
/// and never if it rolls back. Every statement reads the CTE through a scalar subquery in
/// an output row it returns whenever it wrote something, so the CTE is evaluated.
const NOTIFY: &str = "SELECT pg_notify('{chan}', min(claimable_at)::text)";

/// Whether the row `e` can be decoded: `{s}.record_problem(...) IS NULL` (migration v5),
/// written out inline. Claims and their horizon skip rows that cannot be decoded, so no
/// lease is ever issued for a record nobody can read. Each disjunct is one `WHEN` of
/// `record_problem`, in the same order; a row is undecodable when any of them is true (a
/// NULL disjunct, e.g. `octet_length` of a NULL workflow, is no problem there either), so
/// this is true exactly when `record_problem` returns NULL (`tests/decodable.rs` checks the
/// two agree on a row breaking each rule).
///
/// Why not call `record_problem` (issue 12 measurement): it is not inlined (its `format()`
/// is only STABLE), so every call goes through the SQL-function executor, and the planner
/// estimates `f(...) IS NULL` at 0.5% of the rows. That estimate made the claim's pick
/// prefer a bitmap scan of every claimable row (evaluating the function on each) plus a
/// sort over the `(sort_due, id)` index walk that stops after `limit` rows: 12.8 ms for a
/// claim of one over 3,000 due rows, against 0.05 ms for this form. A `CASE` is estimated
/// at one half, so the index walk wins whatever the statistics; its tests are plain
/// operators, evaluated only for rows that passed the cheaper index conditions. The regex
/// is an `E''` literal so it means the same whatever `standard_conforming_strings` says.
const DECODABLE: &str = r"(CASE WHEN e.id IS NULL
        OR octet_length(e.id) NOT BETWEEN 1 AND 255
        OR e.id ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
        OR octet_length(e.workflow) NOT BETWEEN 1 AND 255
        OR e.workflow ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
        OR e.status IS NULL
        OR e.status NOT IN ('admitted', 'running', 'suspended', 'completed', 'failed')
        OR e.token IS NULL OR e.token < 0
        OR e.unacknowledged_deliveries IS NULL
        OR e.unacknowledged_deliveries NOT BETWEEN 0 AND 4294967295
        OR (e.status IN ('completed', 'failed') AND e.outcome IS NULL)
    THEN false ELSE true END)";

/// `$1 limit` -> (id, problem) of every row `record_problem` rejects, by id. A full scan:
/// an operator's call, never on a hot path.
const LIST_CORRUPT: &str = r#"
SELECT e.id, p.problem
FROM {s}.executions e,
    LATERAL (SELECT {s}.record_problem(e.id, e.workflow, e.status, e.token,
        e.unacknowledged_deliveries, e.outcome) AS problem) p
WHERE p.problem IS NOT NULL
ORDER BY e.id
LIMIT $1
"#;

/// `$1 id, $2 clock` -> the stored record and now.
const GET: &str = r#"
SELECT {cols}, COALESCE($2::bigint, {now}) FROM {s}.executions e WHERE e.id = $1
"#;

/// `$1 min, $2 limit, $3 clock` -> stored records and now, by effective unacknowledged count
/// (an expired running lease counts as one more) descending, then id.
const LIST_FAILING: &str = r#"
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
eff AS (
    SELECT {cols}, clk.now AS now_ms,
        e.unacknowledged_deliveries
        + CASE WHEN e.status = 'running' AND COALESCE(e.lease_expires_at <= clk.now, true)
               THEN 1 ELSE 0 END AS effective_unacked
    FROM {s}.executions e, clk
)
SELECT * FROM eff WHERE effective_unacked >= $1 ORDER BY effective_unacked DESC, id LIMIT $2
"#;

/// RFC 001's wake (`ExecutionRecord::request_wake`) of the executions whose id is in
/// `{wake_ids}` (a subquery or a parameter) at `{wake_at}`, `{wake_delays}` the delays
/// parameter: two CTEs, `woken` (the rows changed) and `note` (their wake-up). Terminal:
/// no-op; stored status running: folded into wake_after_claim (no notification: the
/// acknowledgement or the lease's end decides); otherwise into due_at, notifying the row's
/// new `claimable_at`. Written once, for `request_wake` and for the wakes of effect settles
/// and store updates (issue 16); see [`wake_of`].
const WAKE: &str = r#"woken AS (
    UPDATE {s}.executions e SET
        wake_after_claim = CASE WHEN e.status = 'running'
            THEN LEAST(e.wake_after_claim, {wake_at}) ELSE e.wake_after_claim END,
        due_at = CASE WHEN e.status = 'running'
            THEN e.due_at ELSE LEAST(e.due_at, {wake_at}) END,
        claimable_at = {s}.claimable_from(e.status,
            CASE WHEN e.status = 'running' THEN e.due_at ELSE LEAST(e.due_at, {wake_at}) END,
            CASE WHEN e.status = 'running'
                THEN LEAST(e.wake_after_claim, {wake_at}) ELSE e.wake_after_claim END,
            e.lease_expires_at, e.unacknowledged_deliveries, e.last_delivery_ended_at,
            {wake_delays})
    WHERE e.id IN ({wake_ids}) AND e.status NOT IN ('completed', 'failed')
    RETURNING e.status, e.claimable_at
),
note AS MATERIALIZED (
    {notify} FROM woken WHERE woken.status <> 'running'
    HAVING min(woken.claimable_at) IS NOT NULL
)"#;

/// `template` with its `{wake}` replaced by [`WAKE`] for `ids` at `at` with `delays`.
pub(crate) fn wake_of(template: &str, ids: &str, at: &str, delays: &str) -> String {
    template.replace(
        "{wake}",
        &WAKE
            .replace("{wake_ids}", ids)
            .replace("{wake_at}", at)
            .replace("{wake_delays}", delays),
    )
}

/// `$1 id, $2 at, $3 delays` -> (whether the execution exists, notification count).
/// Unfenced: [`WAKE`] of `$1` at `$2`.
const REQUEST_WAKE: &str = r#"
WITH {wake}
SELECT EXISTS (SELECT 1 FROM woken) OR EXISTS (SELECT 1 FROM {s}.executions WHERE id = $1),
    (SELECT count(*) FROM note)
"#;

/// `$1 request now, $2 clock, $3 limit, $4 lease ms, $5 delays` -> (id, token, expires_at,
/// the 12 execution columns as updated by the claim, NULL, NULL, notification count, 0,
/// due) by (due, id): the lease first (a stable prefix the benchmark reads), then the record
/// as the claim left it, so `claim_due_with_records` needs no second round trip; then
/// `{horizon}` appends one summary row (id NULL; columns 15 and 16: the clock the claim ran
/// at and the horizon, see [`CLAIM_HORIZON`]). One `UPDATE ... FROM` the first n rows, by
/// (due, id), of two locking selects (`FOR UPDATE SKIP LOCKED LIMIT n`, schema v7), so no
/// claim walks past a live lease:
///
/// - `waiting`: rows not running, walked by `(sort_due, id)` on `executions_claim_waiting` up
///   to now (`claimable_at >= sort_due`, so the bound is implied), stopping after n
///   claimable rows; it passes over rows waiting out a redelivery delay only. Its
///   `claimable_at + 0` keeps `executions_horizon` out of reach: the generic plan of the
///   prepared statement (which sqlx's cache runs; its LIMIT is a parameter, planned as 10%
///   of the rows) read every due row through that index and sorted them, 67 ms for a claim
///   of one over 5,000 due rows at 10^6 stored, against 0.3 ms for the ordered walk;
/// - `expired`: running rows with `claimable_at <= now` on `executions_claim_expired` (a
///   live lease's `claimable_at` is its expiry plus the redelivery delay, in the future), so
///   it reads only expired leases past their delay, sorted by (due, id).
///
/// The first n of each side hold the first n overall. When both sides have rows, rows of
/// the n + n locked that are not among the first n stay locked (unclaimed) until the commit:
/// only in a full claim (as many as asked), whose summary row (`unpicked`) then reports them
/// due at once, so its dispatcher claims again immediately; concurrent claims skip them
/// meanwhile. An expired running row is first ended as an unacknowledged delivery ended at its expiry
/// (unacked + 1, last_delivery_ended_at = expiry, due_at = min(due_at, wake_after_claim)),
/// then claimed with the next token of the schema's single sequence, issued in claim order.
/// A token not above the row's stored (post-lock) token means the sequence fell behind the
/// tokens already issued: `token_counter_behind` aborts the whole statement (SQLSTATE
/// LT001, nothing claimed) instead of issuing a token twice.
const CLAIM: &str = r#"
WITH clk AS MATERIALIZED (
    SELECT LEAST($1::bigint, COALESCE($2::bigint, {now})) AS now
),
waiting AS MATERIALIZED (
    SELECT e.id, e.sort_due AS due
    FROM {s}.executions e
    WHERE e.claimable_at IS NOT NULL AND e.status <> 'running'
      AND e.sort_due <= (SELECT now FROM clk)
      AND e.claimable_at + 0 <= (SELECT now FROM clk)
      AND {decodable}
    ORDER BY e.sort_due, e.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
),
expired AS MATERIALIZED (
    SELECT e.id, e.sort_due AS due
    FROM {s}.executions e
    WHERE e.claimable_at IS NOT NULL AND e.status = 'running'
      AND e.claimable_at <= (SELECT now FROM clk)
      AND {decodable}
    ORDER BY e.sort_due, e.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
),
picked AS MATERIALIZED (
    SELECT u.id, u.due FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired) u
    ORDER BY u.due, u.id
    LIMIT $3
),
issued AS MATERIALIZED (
    SELECT p.id, p.due, nextval('{s}.fencing_tokens') AS token
    FROM picked p ORDER BY p.due, p.id
),
claimed AS (
    UPDATE {s}.executions e SET
        token = CASE WHEN i.token > e.token THEN i.token
            ELSE {s}.token_counter_behind(i.token, e.token, e.id) END,
        status = 'running',
        unacknowledged_deliveries = CASE WHEN e.status = 'running'
            THEN LEAST(e.unacknowledged_deliveries + 1, 4294967295)
            ELSE e.unacknowledged_deliveries END,
        last_delivery_ended_at = CASE WHEN e.status = 'running'
            THEN e.lease_expires_at ELSE e.last_delivery_ended_at END,
        due_at = i.due,
        lease_expires_at = clk.now + $4,
        wake_after_claim = NULL,
        claimable_at = {s}.claimable_from('running', i.due, NULL, clk.now + $4,
            CASE WHEN e.status = 'running'
                THEN LEAST(e.unacknowledged_deliveries + 1, 4294967295)
                ELSE e.unacknowledged_deliveries END,
            NULL, $5)
    FROM issued i, clk
    WHERE e.id = i.id
    RETURNING {cols}, e.claimable_at, i.due AS claim_order
),
note AS MATERIALIZED ({notify} FROM claimed e HAVING count(*) > 0),
short AS MATERIALIZED (SELECT (SELECT count(*) FROM picked) < $3 AS short),
unpicked AS MATERIALIZED (
    SELECT e.claimable_at FROM {s}.executions e
    WHERE NOT (SELECT short FROM short)
      AND e.claimable_at IS NOT NULL AND e.id NOT IN (SELECT p.id FROM picked p)
      AND {decodable}
    ORDER BY e.claimable_at
    LIMIT 1
),
due_unlocked AS MATERIALIZED (
    SELECT e.claimable_at FROM {s}.executions e
    WHERE (SELECT short FROM short)
      AND e.claimable_at <= (SELECT now FROM clk) AND e.id NOT IN (SELECT p.id FROM picked p)
      AND {decodable}
    ORDER BY e.claimable_at
    LIMIT 1
    FOR KEY SHARE SKIP LOCKED
),
later AS MATERIALIZED (
    SELECT e.claimable_at FROM {s}.executions e
    WHERE (SELECT short FROM short) AND e.claimable_at > (SELECT now FROM clk)
      AND {decodable}
    ORDER BY e.claimable_at
    LIMIT 1
)
SELECT e.id AS lease_id, e.token AS lease_token, e.lease_expires_at AS lease_expiry, {cols},
    NULL::bigint AS now_ms, NULL::bigint AS next_claimable_at,
    (SELECT count(*) FROM note) AS notified, 0 AS part, e.claim_order
FROM claimed e
{horizon}
ORDER BY part, claim_order, lease_id
"#;

/// The claim's summary row: the clock it ran at and the earliest `claimable_at` over the
/// schema's non-terminal executions after the claim: the new leases' (from `claimed`) and
/// every other row's, each part one index seek on `executions_horizon`:
///
/// - a full claim (as many leases as asked; the dispatcher claims again at once): `unpicked`,
///   the smallest value in the statement's snapshot, skipping the rows this claim picked;
/// - a short claim: `later`, the smallest value above the claim's clock in the snapshot, and
///   `due_unlocked`, a row already due that no claim is taking. It reads `FOR KEY SHARE SKIP
///   LOCKED`: KEY SHARE conflicts only with `FOR UPDATE`, which only a claim's `picked`
///   takes, so it skips exactly the rows a concurrent claim is taking (that claim notifies
///   their new instant when it commits), never waits, and reads a row changed by a
///   transaction that committed after the snapshot in its newest version (dropped if no
///   longer due). Without it, every claim racing another for a row reported the row as due
///   and its dispatcher claimed again for nothing. A short claim met no due row it could
///   take, so this never locks a row another claim could pick (bar one made due after the
///   snapshot, for a moment).
///
/// Rows admitted after the snapshot are absent (admission notifies). The horizon is later
/// than the truth only while a concurrent claim that holds a row rolls back, when the
/// dispatcher's backstop poll (and that claimer's own retry) still claims it.
const CLAIM_HORIZON: &str = r#"
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, clk.now,
    LEAST((SELECT min(c.claimable_at) FROM claimed c), (SELECT u.claimable_at FROM unpicked u),
        (SELECT d.claimable_at FROM due_unlocked d), (SELECT l.claimable_at FROM later l)),
    0, 1, NULL
FROM clk
"#;

/// `$1 id, $2 token, $3 clock, $4 lease ms, $5 delays` -> (current token, status, new expiry
/// or NULL when not renewed). No row: unknown execution.
const RENEW: &str = r#"
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
cur AS MATERIALIZED (
    SELECT e.id, e.token, e.status FROM {s}.executions e WHERE e.id = $1 FOR NO KEY UPDATE
),
upd AS (
    UPDATE {s}.executions e SET
        lease_expires_at = clk.now + $4,
        claimable_at = {s}.claimable_from(e.status, e.due_at, e.wake_after_claim,
            clk.now + $4, e.unacknowledged_deliveries, e.last_delivery_ended_at, $5)
    FROM cur, clk
    WHERE e.id = cur.id AND cur.token = $2 AND cur.status = 'running'
    RETURNING e.lease_expires_at
)
SELECT cur.token, cur.status, upd.lease_expires_at FROM cur LEFT JOIN upd ON true
"#;

/// `$1 id, $2 token, $3 clock, $4 delays` -> (current token, status, released?,
/// notification count). Ends the delivery unacknowledged: unacked + 1,
/// last_delivery_ended_at = now, still due; notifies the end of the redelivery delay (the
/// row's new `claimable_at`).
const RELEASE: &str = r#"
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
cur AS MATERIALIZED (
    SELECT e.id, e.token, e.status FROM {s}.executions e WHERE e.id = $1 FOR NO KEY UPDATE
),
upd AS (
    UPDATE {s}.executions e SET
        unacknowledged_deliveries = LEAST(e.unacknowledged_deliveries + 1, 4294967295),
        last_delivery_ended_at = clk.now,
        due_at = LEAST(e.due_at, e.wake_after_claim),
        wake_after_claim = NULL,
        lease_expires_at = NULL,
        status = CASE WHEN e.ever_suspended THEN 'suspended' ELSE 'admitted' END,
        claimable_at = {s}.claimable_from(
            CASE WHEN e.ever_suspended THEN 'suspended' ELSE 'admitted' END,
            LEAST(e.due_at, e.wake_after_claim), NULL, NULL,
            LEAST(e.unacknowledged_deliveries + 1, 4294967295), clk.now, $4)
    FROM cur, clk
    WHERE e.id = cur.id AND cur.token = $2 AND cur.status = 'running'
    RETURNING true AS released, e.claimable_at
),
note AS MATERIALIZED ({notify} FROM upd HAVING min(upd.claimable_at) IS NOT NULL)
SELECT cur.token, cur.status, upd.released, (SELECT count(*) FROM note)
FROM cur LEFT JOIN upd ON true
"#;

/// `$1 id, $2 token, $3 clock, $4 new status, $5 outcome` -> (current token, status,
/// acknowledged?, notification count). Resets unacked; suspended: due at the earliest wake
/// requested during the delivery (or never), notified when there is one; completed/failed:
/// terminal with the outcome.
const ACKNOWLEDGE: &str = r#"
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
cur AS MATERIALIZED (
    SELECT e.id, e.token, e.status FROM {s}.executions e WHERE e.id = $1 FOR NO KEY UPDATE
),
upd AS (
    UPDATE {s}.executions e SET
        unacknowledged_deliveries = 0,
        last_delivery_ended_at = clk.now,
        lease_expires_at = NULL,
        wake_after_claim = NULL,
        status = $4,
        ever_suspended = e.ever_suspended OR $4 = 'suspended',
        due_at = CASE WHEN $4 = 'suspended' THEN e.wake_after_claim ELSE NULL END,
        outcome = CASE WHEN $4 = 'suspended' THEN e.outcome ELSE $5 END,
        claimable_at = CASE WHEN $4 = 'suspended' THEN e.wake_after_claim ELSE NULL END
    FROM cur, clk
    WHERE e.id = cur.id AND cur.token = $2 AND cur.status = 'running'
    RETURNING true AS acknowledged, e.claimable_at
),
note AS MATERIALIZED ({notify} FROM upd HAVING min(upd.claimable_at) IS NOT NULL)
SELECT cur.token, cur.status, upd.acknowledged, (SELECT count(*) FROM note)
FROM cur LEFT JOIN upd ON true
"#;

/// The claim limit of `acknowledge_and_claim`'s claim (issue 12), replacing the claim's
/// `$3`: `$6 id, $7 lease token, $3 limit` -> `$3` when the acknowledgement was not
/// refused outright, else 0 (the claim then writes nothing). Refused (token 0, an unknown
/// execution, or a token above the execution's latest) is decided on the same row
/// [`ACKNOWLEDGE`] locked `FOR NO KEY UPDATE` earlier in the transaction, so it cannot
/// have changed in between and this agrees with the acknowledgement's verdict. An id
/// unknown to the acknowledgement and admitted since has token 0, still below `$7`.
const ACK_AND_CLAIM_LIMIT: &str = r#"(CASE WHEN EXISTS (
    SELECT 1 FROM {s}.executions g WHERE g.id = $6 AND g.token >= $7 AND $7 > 0
) THEN $3 ELSE 0 END)"#;

/// The parameter types of [`ACKNOWLEDGE`] as `acknowledge_and_claim` prepares it.
const ACK_PARAM_TYPES: &str = "text, bigint, bigint, text, text";

/// The parameter types of [`CLAIM`] limited by [`ACK_AND_CLAIM_LIMIT`].
const CLAIM_AFTER_ACK_PARAM_TYPES: &str = "bigint, bigint, bigint, bigint, bigint[], text, bigint";

/// `$1 ids text[], $2 tokens bigint[], $3 new statuses text[], $4 outcomes text[] (NULL for
/// suspended), $5 clock` -> one row per item in item order: (item number from 1, current
/// token, status; both NULL for an unknown execution, acknowledged?, notification count).
/// The ids must be distinct (`check_ack_batch`). One notification: the earliest wake of
/// the items acknowledged as suspended with one.
///
/// Each item is the single [`ACKNOWLEDGE`] applied independently, in one statement: the
/// items' rows are locked `FOR NO KEY UPDATE` in id order (concurrent batches lock their
/// common rows in the same order, so they cannot deadlock each other), every item gets a
/// verdict from the row version current after its lock, and the update applies the items
/// whose token is current on a running row, but only when no item is refused outright
/// (unknown execution, token 0 or a token above the execution's latest): then nothing is
/// written and the caller reports the first refused item's error.
const ACKNOWLEDGE_BATCH: &str = r#"
WITH clk AS MATERIALIZED (SELECT COALESCE($5::bigint, {now}) AS now),
items AS MATERIALIZED (
    SELECT u.ord, u.id, u.token, u.status, u.outcome
    FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[])
        WITH ORDINALITY AS u(id, token, status, outcome, ord)
),
cur AS MATERIALIZED (
    SELECT e.id, e.token, e.status FROM {s}.executions e
    WHERE e.id = ANY ($1::text[])
    ORDER BY e.id
    FOR NO KEY UPDATE
),
verdict AS MATERIALIZED (
    SELECT i.ord, i.id, i.token AS lease_token, i.status AS new_status, i.outcome,
        c.token AS cur_token, c.status AS cur_status,
        (c.id IS NULL OR i.token = 0 OR i.token > c.token) AS refused
    FROM items i LEFT JOIN cur c ON c.id = i.id
),
upd AS (
    UPDATE {s}.executions e SET
        unacknowledged_deliveries = 0,
        last_delivery_ended_at = clk.now,
        lease_expires_at = NULL,
        wake_after_claim = NULL,
        status = v.new_status,
        ever_suspended = e.ever_suspended OR v.new_status = 'suspended',
        due_at = CASE WHEN v.new_status = 'suspended' THEN e.wake_after_claim ELSE NULL END,
        outcome = CASE WHEN v.new_status = 'suspended' THEN e.outcome ELSE v.outcome END,
        claimable_at = CASE WHEN v.new_status = 'suspended'
            THEN e.wake_after_claim ELSE NULL END
    FROM verdict v, clk
    WHERE e.id = v.id AND v.cur_token = v.lease_token AND v.cur_status = 'running'
      AND NOT EXISTS (SELECT 1 FROM verdict r WHERE r.refused)
    RETURNING e.id, e.claimable_at
),
note AS MATERIALIZED ({notify} FROM upd HAVING min(upd.claimable_at) IS NOT NULL)
SELECT v.ord, v.cur_token, v.cur_status, (u.id IS NOT NULL) AS acknowledged,
    (SELECT count(*) FROM note)
FROM verdict v LEFT JOIN upd u ON u.id = v.id
ORDER BY v.ord
"#;

/// `$1 id, $2 token, $3 step key, $4 attempt, $5 done, $6 response` -> (current token,
/// status, recorded done, response, token, inserted; NULLs when rejected). `FOR SHARE` on
/// the execution row; an existing record is returned unchanged (the no-op `DO UPDATE`
/// returns the committed row even when this statement's snapshot cannot see it), with
/// `inserted` false (`xmax = 0` only on a row this statement inserted), so `step_in_tx`
/// can refuse to commit an effect whose record already existed.
const WRITE_STEP: &str = r#"
WITH cur AS MATERIALIZED (
    SELECT e.token, e.status FROM {s}.executions e WHERE e.id = $1 FOR SHARE
),
ins AS (
    INSERT INTO {s}.steps AS st (execution_id, step_key, step_attempt, done, response, token)
    SELECT $1, $3, $4, $5, $6, $2 FROM cur WHERE cur.token = $2 AND cur.status = 'running'
    ON CONFLICT (execution_id, step_key, step_attempt) DO UPDATE SET token = st.token
    RETURNING st.done, st.response, st.token, (st.xmax = 0) AS inserted
)
SELECT cur.token, cur.status, ins.done, ins.response, ins.token, ins.inserted
FROM cur LEFT JOIN ins ON true
"#;

/// The deliberately broken step write of cfg `lease_postgres_nonatomic_fencing_experiment` (build.rs):
/// a bare `INSERT ... WHERE EXISTS (token = n)` that reads the token from the statement's
/// snapshot without a lock, so a claim committing in between goes unnoticed.
#[cfg(lease_postgres_nonatomic_fencing_experiment)]
const WRITE_STEP_NONATOMIC: &str = r#"
WITH ins AS (
    INSERT INTO {s}.steps AS st (execution_id, step_key, step_attempt, done, response, token)
    SELECT $1, $3, $4, $5, $6, $2
    WHERE EXISTS (SELECT 1 FROM {s}.executions x
                  WHERE x.id = $1 AND x.token = $2 AND x.status = 'running')
    ON CONFLICT (execution_id, step_key, step_attempt) DO UPDATE SET token = st.token
    RETURNING st.done, st.response, st.token, (st.xmax = 0) AS inserted
),
cur AS (SELECT e.token, e.status FROM {s}.executions e WHERE e.id = $1)
SELECT cur.token, cur.status, ins.done, ins.response, ins.token, ins.inserted
FROM cur LEFT JOIN ins ON true
"#;

/// The deliberately broken acknowledge of the experiment feature: the token is checked in an
/// unlocked snapshot read, so the update overwrites a claim that committed in between.
#[cfg(lease_postgres_nonatomic_fencing_experiment)]
const ACKNOWLEDGE_NONATOMIC: &str = r#"
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
cur AS MATERIALIZED (SELECT e.id, e.token, e.status FROM {s}.executions e WHERE e.id = $1),
upd AS (
    UPDATE {s}.executions e SET
        unacknowledged_deliveries = 0,
        last_delivery_ended_at = clk.now,
        lease_expires_at = NULL,
        wake_after_claim = NULL,
        status = $4,
        ever_suspended = e.ever_suspended OR $4 = 'suspended',
        due_at = CASE WHEN $4 = 'suspended' THEN e.wake_after_claim ELSE NULL END,
        outcome = CASE WHEN $4 = 'suspended' THEN e.outcome ELSE $5 END,
        claimable_at = CASE WHEN $4 = 'suspended' THEN e.wake_after_claim ELSE NULL END
    FROM cur, clk
    WHERE e.id = cur.id AND cur.token = $2 AND cur.status = 'running'
    RETURNING true AS acknowledged
)
SELECT cur.token, cur.status, upd.acknowledged FROM cur LEFT JOIN upd ON true
"#;

/// `$1 before, $2 limit` -> the ids purged, by id (issue 12, retention). Takes up to `$2`
/// terminal executions acknowledged before `$1` (`last_delivery_ended_at` of a completed or
/// failed row), oldest first, from the `executions_terminal` index (migration v6), and
/// deletes them with their step records, the store receipts they made, the start records
/// naming them, their effects and their store-waiter registrations, in one statement. Never a non-terminal row: no transition leaves a
/// terminal status, so the condition re-checked on a row's newest version after its lock
/// cannot change. Rows are locked `FOR UPDATE SKIP LOCKED`: a row some statement holds
/// (a stale holder's fenced write, another purge) is left for a later call instead of
/// waiting for it, so purges never queue behind the hot path nor each other, and two
/// concurrent purges take disjoint rows; a fenced write that waited for a purge's lock
/// then finds no row (`UnknownExecution`). Rows `record_problem` rejects are left for
/// `list_corrupt` (their ids could not be reported).
const PURGE_TERMINAL: &str = r#"
WITH victims AS MATERIALIZED (
    SELECT e.id FROM {s}.executions e
    WHERE e.status IN ('completed', 'failed') AND e.last_delivery_ended_at < $1
      AND {decodable}
    ORDER BY e.last_delivery_ended_at, e.id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM {s}.executions e USING victims v WHERE e.id = v.id RETURNING e.id
),
steps AS (
    DELETE FROM {s}.steps st USING victims v WHERE st.execution_id = v.id
),
receipts AS (
    DELETE FROM {s}.store_receipts r USING victims v WHERE r.execution_id = v.id
),
starts AS (
    DELETE FROM {s}.start_requests q USING victims v WHERE q.target = v.id
),
effects AS (
    DELETE FROM {s}.effects f USING victims v WHERE f.execution_id = v.id
),
waiters AS (
    DELETE FROM {s}.store_waiters w USING victims v WHERE w.execution_id = v.id
)
SELECT g.id FROM gone g ORDER BY g.id
"#;

/// `$1 id, $2 step key, $3 attempt` -> one step record.
const READ_STEP: &str = r#"
SELECT execution_id, step_key, step_attempt, done, response, token FROM {s}.steps
WHERE execution_id = $1 AND step_key = $2 AND step_attempt = $3
"#;

/// `$1 id` -> the execution's step records by key, then attempt.
const LIST_STEPS: &str = r#"
SELECT execution_id, step_key, step_attempt, done, response, token FROM {s}.steps
WHERE execution_id = $1 ORDER BY step_key, step_attempt
"#;

/// `$1 store, $2 keys, $3 values` -> rows (kind, key, value): a `created` or `existing`
/// header, then `entry` rows. No header: created by a transaction this snapshot cannot see;
/// run it again.
const GET_OR_CREATE: &str = r#"
WITH ins AS (
    INSERT INTO {s}.stores (store_id) VALUES ($1) ON CONFLICT DO NOTHING RETURNING store_id
),
ent AS (
    INSERT INTO {s}.store_entries (store_id, entry_key, value)
    SELECT $1, u.k, u.v FROM unnest($2::text[], $3::text[]) AS u(k, v)
    WHERE EXISTS (SELECT 1 FROM ins)
    RETURNING entry_key, value
)
SELECT 'created' AS kind, NULL::text AS entry_key, NULL::text AS value FROM ins
UNION ALL SELECT 'entry', entry_key, value FROM ent
UNION ALL SELECT 'existing', NULL, NULL FROM {s}.stores x
    WHERE x.store_id = $1 AND NOT EXISTS (SELECT 1 FROM ins)
UNION ALL SELECT 'entry', x.entry_key, x.value FROM {s}.store_entries x
    WHERE x.store_id = $1 AND NOT EXISTS (SELECT 1 FROM ins)
"#;

/// `$1 store, $2 key` -> (store exists, entry value).
const READ_ENTRY: &str = r#"
SELECT EXISTS (SELECT 1 FROM {s}.stores WHERE store_id = $1),
       (SELECT value FROM {s}.store_entries WHERE store_id = $1 AND entry_key = $2)
"#;

/// Store update, statement 1 of its transaction: `$1 store` -> a row when the store exists,
/// locked against concurrent updates of the same store.
const LOCK_STORE: &str = r#"
SELECT store_id FROM {s}.stores WHERE store_id = $1 FOR NO KEY UPDATE
"#;

/// Statement 2 (a fresh snapshot taken after the lock): `$1 store, $2 execution, $3 step
/// key, $4 entry key` -> (receipt exists, applied, previous, current value).
const READ_RECEIPT: &str = r#"
SELECT r.store_id IS NOT NULL, r.applied, r.previous,
       (SELECT value FROM {s}.store_entries WHERE store_id = $1 AND entry_key = $4)
FROM (SELECT 1) one
LEFT JOIN {s}.store_receipts r
    ON r.store_id = $1 AND r.execution_id = $2 AND r.step_key = $3
"#;

/// Statement 3: `$1 store, $2 entry key, $3 new value (NULL: absent), $4 applied,
/// $5 execution, $6 step key, $7 previous, $8 clock, $9 delays` -> (notification count):
/// writes the entry when applied and records the receipt. An applied op also takes the
/// entry's store waiters (one-shot, issue 16) and wakes them ([`WAKE`] at the backend's now).
const APPLY_UPDATE: &str = r#"
WITH clk AS MATERIALIZED (SELECT COALESCE($8::bigint, {now}) AS now),
del AS (
    DELETE FROM {s}.store_entries
    WHERE store_id = $1 AND entry_key = $2 AND $4 AND $3::text IS NULL
    RETURNING 1
),
put AS (
    INSERT INTO {s}.store_entries (store_id, entry_key, value)
    SELECT $1, $2, $3 WHERE $4 AND $3::text IS NOT NULL
    ON CONFLICT (store_id, entry_key) DO UPDATE SET value = EXCLUDED.value
    RETURNING 1
),
taken AS (
    DELETE FROM {s}.store_waiters w WHERE w.store_id = $1 AND w.entry_key = $2 AND $4
    RETURNING w.execution_id
),
{wake}
INSERT INTO {s}.store_receipts (store_id, execution_id, step_key, applied, previous)
VALUES ($1, $5, $6, $4, $7)
RETURNING (SELECT count(*) FROM note)
"#;

/// `$1 request id, $2 target, $3 workflow, $4 input, $5 clock` -> (created, existing
/// target, notification count; a created target notifies its due time). A target id that already exists raises a unique violation on
/// `executions_pkey`, which rolls the mapping back too. (false, NULL): the request was
/// recorded by a transaction this snapshot cannot see; run it again.
const START: &str = r#"
WITH clk AS MATERIALIZED (SELECT COALESCE($5::bigint, {now}) AS now),
m AS (
    INSERT INTO {s}.start_requests (request_id, target) VALUES ($1, $2)
    ON CONFLICT (request_id) DO NOTHING
    RETURNING target
),
ins AS (
    INSERT INTO {s}.executions
        (id, workflow, input, status, token, due_at, unacknowledged_deliveries,
         ever_suspended, claimable_at)
    SELECT $2, $3, $4, 'admitted', 0, clk.now, 0, false, clk.now FROM m, clk
    RETURNING id, claimable_at
),
note AS MATERIALIZED ({notify} FROM ins HAVING count(*) > 0)
SELECT EXISTS (SELECT 1 FROM ins),
       (SELECT target FROM {s}.start_requests WHERE request_id = $1),
       (SELECT count(*) FROM note)
"#;

/// `()` -> the database clock.
const NOW: &str = "SELECT {now}";

/// `DROP SCHEMA ... CASCADE` (`drop_schema_forced`).
const DROP_SCHEMA: &str = "DROP SCHEMA IF EXISTS {s} CASCADE";

/// The library's objects, then the schema, each `RESTRICT` (`drop_schema`).
const DROP_SCHEMA_RESTRICT: &str = include_str!("sql/drop_schema.sql");

/// The unique constraint a start target collides with when the execution already exists.
pub(crate) const EXECUTIONS_PKEY: &str = "executions_pkey";

/// The statements of one schema, rendered once; cloning a statement is an `Arc` bump.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) admit: Arc<str>,
    pub(crate) admit_batch: Arc<str>,
    pub(crate) get: Arc<str>,
    pub(crate) list_failing: Arc<str>,
    pub(crate) list_corrupt: Arc<str>,
    pub(crate) request_wake: Arc<str>,
    pub(crate) claim: Arc<str>,
    /// The claim without its summary row (the benchmark's raw baseline reads only leases).
    pub(crate) claim_leases_only: Arc<str>,
    pub(crate) renew: Arc<str>,
    pub(crate) release: Arc<str>,
    pub(crate) acknowledge: Arc<str>,
    pub(crate) acknowledge_batch: Arc<str>,
    /// `acknowledge_and_claim`'s two per-connection prepared statements.
    pub(crate) ack_and_claim: AckAndClaimStatements,
    pub(crate) purge_terminal: Arc<str>,
    pub(crate) status_counts: Arc<str>,
    pub(crate) write_step: Arc<str>,
    pub(crate) read_step: Arc<str>,
    pub(crate) list_steps: Arc<str>,
    pub(crate) list_steps_page: Arc<str>,
    pub(crate) get_or_create: Arc<str>,
    pub(crate) read_entry: Arc<str>,
    pub(crate) lock_store: Arc<str>,
    pub(crate) read_receipt: Arc<str>,
    pub(crate) apply_update: Arc<str>,
    pub(crate) start: Arc<str>,
    /// Effects and store waiters (issue 16).
    pub(crate) effects: crate::effect::EffectStatements,
    pub(crate) now: Arc<str>,
    pub(crate) drop_schema: Arc<str>,
    pub(crate) drop_schema_restrict: Arc<str>,
}

impl Statements {
    /// Renders every statement for the quoted schema name `schema`, notifying `channel`.
    pub(crate) fn new(schema: &str, channel: &str) -> Self {
        let notify = NOTIFY.replace("{chan}", channel);
        let r = |template: &str| {
            render(
                &template
                    .replace("{horizon}", CLAIM_HORIZON)
                    .replace("{notify}", &notify),
                schema,
            )
        };
        #[cfg(not(lease_postgres_nonatomic_fencing_experiment))]
        let (write_step, acknowledge) = (r(WRITE_STEP), r(ACKNOWLEDGE));
        #[cfg(lease_postgres_nonatomic_fencing_experiment)]
        let (write_step, acknowledge) = {
            let _ = (WRITE_STEP, ACKNOWLEDGE);
            (r(WRITE_STEP_NONATOMIC), r(ACKNOWLEDGE_NONATOMIC))
        };
        Statements {
            admit: r(ADMIT),
            admit_batch: r(ADMIT_BATCH),
            get: r(GET),
            list_failing: r(LIST_FAILING),
            list_corrupt: r(LIST_CORRUPT),
            request_wake: r(&wake_of(REQUEST_WAKE, "$1", "$2", "$3")),
            claim: r(CLAIM),
            claim_leases_only: r(&CLAIM.replace("{horizon}", "")),
            renew: r(RENEW),
            release: r(RELEASE),
            acknowledge: acknowledge.clone(),
            acknowledge_batch: r(ACKNOWLEDGE_BATCH),
            ack_and_claim: AckAndClaimStatements::new(
                &acknowledge,
                &r(&CLAIM.replace("$3", ACK_AND_CLAIM_LIMIT)),
            ),
            purge_terminal: r(PURGE_TERMINAL),
            status_counts: r(crate::counts::STATUS_COUNTS),
            write_step,
            read_step: r(READ_STEP),
            list_steps: r(LIST_STEPS),
            list_steps_page: r(include_str!("sql/list_steps_page.sql")),
            get_or_create: r(GET_OR_CREATE),
            read_entry: r(READ_ENTRY),
            lock_store: r(LOCK_STORE),
            read_receipt: r(READ_RECEIPT),
            apply_update: r(&wake_of(
                APPLY_UPDATE,
                "SELECT execution_id FROM taken",
                "(SELECT now FROM clk)",
                "$9",
            )),
            start: r(START),
            effects: crate::effect::EffectStatements::new(&r),
            now: r(NOW),
            drop_schema: r(DROP_SCHEMA),
            drop_schema_restrict: r(DROP_SCHEMA_RESTRICT),
        }
    }
}

/// One parameter of a statement sent with its values inlined, over the simple query
/// protocol (`acknowledge_and_claim`'s `EXECUTE`s, which need two statements in one round
/// trip: sqlx cannot pipeline extended-protocol statements). Rendered typed and parenthesised, so it
/// means in every position exactly what the bound parameter of the same type would.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Literal<'a> {
    /// A text value (`NULL` for `None`).
    Text(Option<&'a str>),
    /// A bigint value (`NULL` for `None`).
    BigInt(Option<i64>),
    /// A `bigint[]` value.
    BigInts(&'a [i64]),
}

impl Literal<'_> {
    fn write(&self, out: &mut String) {
        use std::fmt::Write as _;
        match self {
            Literal::Text(None) => out.push_str("(NULL::text)"),
            // An escape string literal: backslashes and quotes are escaped whatever
            // `standard_conforming_strings` says, and in UTF-8 (the connection's encoding)
            // no byte of a multi-byte character is a quote or a backslash.
            Literal::Text(Some(text)) => {
                out.push_str("(E'");
                for c in text.chars() {
                    match c {
                        '\'' => out.push_str("''"),
                        '\\' => out.push_str("\\\\"),
                        c => out.push(c),
                    }
                }
                out.push_str("'::text)");
            }
            Literal::BigInt(None) => out.push_str("(NULL::bigint)"),
            Literal::BigInt(Some(n)) => {
                let _ = write!(out, "({n}::bigint)");
            }
            Literal::BigInts(values) => {
                out.push_str("(ARRAY[");
                for (i, n) in values.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{n}::bigint");
                }
                out.push_str("]::bigint[])");
            }
        }
    }

    /// Whether the value can be sent at all: PostgreSQL text cannot hold U+0000 (as a bound
    /// parameter the server refuses it too).
    fn sendable(&self) -> bool {
        !matches!(self, Literal::Text(Some(t)) if t.contains('\0'))
    }
}

/// `statement` (rendered) with every parameter `$n` outside quoted literals and identifiers
/// replaced by `params[n - 1]`. `None` when a value cannot be sent (see
/// [`Literal::sendable`]). A `$n` without a value is left as is (the server then refuses the
/// statement, which changes nothing); the unit tests cover every statement this renders.
pub(crate) fn bind_literals(statement: &str, params: &[Literal<'_>]) -> Option<String> {
    if !params.iter().all(Literal::sendable) {
        return None;
    }
    let mut out = String::with_capacity(statement.len() + 64);
    let mut chars = statement.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' | '"' => {
                // Copy the quoted run verbatim; a doubled quote stays inside it.
                out.push(c);
                for (_, q) in chars.by_ref() {
                    out.push(q);
                    if q == c {
                        break;
                    }
                }
            }
            '$' => {
                let digits: String = std::iter::from_fn(|| {
                    chars.next_if(|(_, d)| d.is_ascii_digit()).map(|(_, d)| d)
                })
                .collect();
                let param = digits
                    .parse::<usize>()
                    .ok()
                    .and_then(|n| n.checked_sub(1))
                    .and_then(|n| params.get(n));
                match param {
                    Some(p) => p.write(&mut out),
                    None => {
                        out.push_str(&statement[i..i + 1]);
                        out.push_str(&digits);
                    }
                }
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// The parameters of `acknowledge_and_claim`: those of [`ACKNOWLEDGE`] and of [`CLAIM`].
#[derive(Debug)]
pub(crate) struct AckThenClaim<'a> {
    pub(crate) id: &'a str,
    pub(crate) token: i64,
    pub(crate) clock: Option<i64>,
    pub(crate) status: &'a str,
    pub(crate) outcome: Option<&'a str>,
    pub(crate) requested: i64,
    pub(crate) limit: i64,
    pub(crate) lease_ms: i64,
    pub(crate) delays: &'a [i64],
}

/// `acknowledge_and_claim`'s statements (issue 12): [`ACKNOWLEDGE`] and [`CLAIM`] (with its
/// summary row, limited by [`ACK_AND_CLAIM_LIMIT`]) as SQL-level prepared statements, run
/// as `EXECUTE a(...); EXECUTE c(...)` in ONE simple-query message. The server runs the
/// statements of one message as one implicit transaction: one round trip, one commit, and
/// an error in either rolls both back. Each statement takes its own snapshot, so the claim
/// sees the acknowledgement (an acknowledged row that is due again is claimed again); the
/// acknowledgement's row lock is held until the commit.
///
/// Why prepared (measured, issue 12): sent with their values inlined, both statements were
/// parsed and planned on every call (about 1.2 ms of planning for the claim alone on the
/// test machine), which made the one round trip slower than `acknowledge` +
/// `claim_due_with_horizon` with sqlx's cached plans. A prepared statement lives in its
/// session, so each pooled connection prepares them on first use (an `EXECUTE` of a name
/// the connection lacks fails before anything ran, see `execution.rs`). The names carry a
/// hash of the statement text, so a connection can never run another text under a name.
#[derive(Debug)]
pub(crate) struct AckAndClaimStatements {
    /// `PREPARE <ack name>(...) AS <acknowledge>`.
    pub(crate) prepare_ack: Arc<str>,
    /// `PREPARE <claim name>(...) AS <claim>`.
    pub(crate) prepare_claim: Arc<str>,
    ack_name: String,
    claim_name: String,
}

impl AckAndClaimStatements {
    fn new(acknowledge: &str, claim: &str) -> Self {
        let ack_name = format!("lease_ack_{:016x}", fnv1a(acknowledge.as_bytes()));
        let claim_name = format!("lease_claim_after_ack_{:016x}", fnv1a(claim.as_bytes()));
        AckAndClaimStatements {
            prepare_ack: format!("PREPARE {ack_name}({ACK_PARAM_TYPES}) AS {acknowledge}").into(),
            prepare_claim: format!(
                "PREPARE {claim_name}({CLAIM_AFTER_ACK_PARAM_TYPES}) AS {claim}"
            )
            .into(),
            ack_name,
            claim_name,
        }
    }

    /// The names of the two prepared statements (acknowledge, claim).
    #[cfg(test)]
    pub(crate) fn names(&self) -> [&str; 2] {
        [&self.ack_name, &self.claim_name]
    }

    /// The one simple-query message running both prepared statements with `p`'s values as
    /// typed literals. `None`: a value cannot be sent.
    pub(crate) fn execute(&self, p: &AckThenClaim<'_>) -> Option<String> {
        use Literal::{BigInt, BigInts, Text};
        let ack = execute_literals(
            &self.ack_name,
            &[
                Text(Some(p.id)),
                BigInt(Some(p.token)),
                BigInt(p.clock),
                Text(Some(p.status)),
                Text(p.outcome),
            ],
        )?;
        let claim = execute_literals(
            &self.claim_name,
            &[
                BigInt(Some(p.requested)),
                BigInt(p.clock),
                BigInt(Some(p.limit)),
                BigInt(Some(p.lease_ms)),
                BigInts(p.delays),
                Text(Some(p.id)),
                BigInt(Some(p.token)),
            ],
        )?;
        Some(format!("{ack}; {claim}"))
    }
}

/// `EXECUTE name(p1, ..., pn)` with every value a typed literal; `None` when a value cannot
/// be sent (see [`Literal::sendable`]).
fn execute_literals(name: &str, params: &[Literal<'_>]) -> Option<String> {
    if !params.iter().all(Literal::sendable) {
        return None;
    }
    let mut out = format!("EXECUTE {name}(");
    for (i, p) in params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        p.write(&mut out);
    }
    out.push(')');
    Some(out)
}

/// 64-bit FNV-1a: stable across processes and Rust versions, unlike `DefaultHasher`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Substitutes the placeholders of a template.
pub(crate) fn render(template: &str, schema: &str) -> Arc<str> {
    template
        .replace("{decodable}", DECODABLE)
        .replace("{found_cols}", FOUND_COLS)
        .replace("{cols}", COLS)
        .replace("{now}", DB_NOW)
        .replace("{s}", schema)
        .trim()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_rendered() {
        let s = Statements::new("\"t\"", "lease_wake_t");
        for sql in [
            &s.admit,
            &s.claim,
            &s.acknowledge_batch,
            &s.write_step,
            &s.start,
            &s.list_failing,
        ] {
            assert!(!sql.contains('{') && !sql.contains('}'), "{sql}");
        }
        assert!(s.claim.contains("\"t\".fencing_tokens"));
        assert!(s.claim.contains("clock_timestamp()"));
        assert!(!s.claim.contains("now()"));
    }
    #[test]
    fn literals_are_quoted_and_typed() {
        let sql = bind_literals(
            "SELECT $1, '$2', \"$3\", $2, $10, $3, $4, $5",
            &[
                Literal::Text(Some(r"it's a \ back'slash")),
                Literal::BigInt(Some(-7)),
                Literal::BigInts(&[1, 2]),
                Literal::BigInts(&[]),
                Literal::Text(None),
            ],
        )
        .expect("sendable");
        assert_eq!(
            sql,
            "SELECT (E'it''s a \\\\ back''slash'::text), '$2', \"$3\", (-7::bigint), $10, \
             (ARRAY[1::bigint,2::bigint]::bigint[]), (ARRAY[]::bigint[]), (NULL::text)"
        );
        assert!(bind_literals("SELECT $1", &[Literal::Text(Some("a\0b"))]).is_none());
    }

    #[test]
    fn ack_then_claim_prepares_both_statements_and_executes_them_in_one_message() {
        let s = Statements::new("\"t\"", "lease_wake_t");
        let ac = &s.ack_and_claim;
        let [ack, claim] = ac.names();
        assert!(ack.starts_with("lease_ack_") && claim.starts_with("lease_claim_after_ack_"));
        assert!(ack.len() <= 63 && claim.len() <= 63, "{ack} {claim}");
        assert!(ac.prepare_ack.starts_with(&format!(
            "PREPARE {ack}(text, bigint, bigint, text, text) AS WITH"
        )));
        assert!(
            ac.prepare_ack.ends_with(&*s.acknowledge),
            "{}",
            ac.prepare_ack
        );
        assert!(ac.prepare_claim.starts_with(&format!(
            "PREPARE {claim}(bigint, bigint, bigint, bigint, bigint[], text, bigint) AS WITH"
        )));
        for sql in [&ac.prepare_ack, &ac.prepare_claim] {
            assert!(!sql.contains('{') && !sql.contains('}'), "{sql}");
        }
        // The claim's limit is the acknowledgement-dependent one, in the LIMITs of
        // `waiting`, `expired` and `picked` and in `short`.
        assert_eq!(
            ac.prepare_claim
                .matches("g.id = $6 AND g.token >= $7")
                .count(),
            4
        );
        assert!(
            !ac.prepare_claim.contains("LIMIT $3"),
            "{}",
            ac.prepare_claim
        );
        // Another statement text never gets the same name.
        let other = Statements::new("\"u\"", "lease_wake_u");
        assert_ne!(other.ack_and_claim.names(), ac.names());

        let sql = ac
            .execute(&AckThenClaim {
                id: "a",
                token: 3,
                clock: None,
                status: "completed",
                outcome: Some("{\"x\":\"'$1\"}"),
                requested: 10,
                limit: 1,
                lease_ms: 30_000,
                delays: &[100, 200],
            })
            .expect("sendable");
        assert_eq!(
            sql,
            format!(
                "EXECUTE {ack}((E'a'::text), (3::bigint), (NULL::bigint), (E'completed'::text), \
                 (E'{{\"x\":\"''$1\"}}'::text)); EXECUTE {claim}((10::bigint), (NULL::bigint), \
                 (1::bigint), (30000::bigint), (ARRAY[100::bigint,200::bigint]::bigint[]), \
                 (E'a'::text), (3::bigint))"
            )
        );
        let unsendable = AckThenClaim {
            id: "a",
            token: 3,
            clock: Some(5),
            status: "completed",
            outcome: Some("a\0b"),
            requested: 10,
            limit: 1,
            lease_ms: 30_000,
            delays: &[],
        };
        assert!(ac.execute(&unsendable).is_none());
    }
}
