-- `$1 request now, $2 clock, $3 limit, $4 lease ms, $5 delays` -> (id, token, expires_at,
-- the 20 execution columns as updated by the claim, NULL, NULL, notification count, 0,
-- claim order, NULL) in claim order: the lease first (a stable prefix the benchmark reads),
-- then the record as the claim left it, so `claim_due_with_records` needs no second round
-- trip; then `{horizon}` appends one summary row (id NULL; columns 22, 23 and 27: the clock
-- the claim ran at, the horizon and whether the claim was handed to the key gate, see
-- `claim_horizon.sql`). One `UPDATE ... FROM` the first n rows, by (priority DESC, due,
-- id), of two locking selects (`FOR UPDATE SKIP LOCKED LIMIT n`, schema v7 and v10), so
-- no claim walks past a live lease (`claim_candidates.sql`):
--
-- - `waiting`: rows not running, one priority level at a time, each level walked by
--   `(sort_due, id)` up to now (`claimable_at >= sort_due`, so the bound is implied),
--   stopping after n claimable rows; it passes over rows waiting out a redelivery delay
--   only. Its `claimable_at + 0` keeps the horizon's index out of reach: the generic plan
--   of the prepared statement (which sqlx's cache runs; its LIMIT is a parameter, planned
--   as 10% of the rows) read every due row through that index and sorted them, 67 ms for a
--   claim of one over 5,000 due rows at 10^6 stored, against 0.3 ms for the ordered walk;
-- - `expired`: running rows with `claimable_at <= now` on `executions_claim_expired` (a
--   live lease's `claimable_at` is its expiry plus the redelivery delay, in the future), so
--   it reads only expired leases past their redelivery delay, sorted by claim order.
--
-- The first n of each side hold the first n overall. When both sides have rows, rows of
-- the n + n locked that are not among the first n stay locked (unclaimed) until the commit:
-- only in a full claim (as many as asked), whose summary row (`unpicked`) then reports them
-- due at once, so its dispatcher claims again immediately; concurrent claims skip them
-- meanwhile.
--
-- Concurrency limits: this statement cannot count a key's live leases race-free (its
-- snapshot predates a concurrent claim's commit). When limits exist and a picked row has a
-- key some limit applies to (its own or the namespace default), `gated` is true: it claims
-- nothing and says so in the summary row, and the caller runs the key gate's transaction
-- (`gate.rs`). The same for an ordered or rate-limited key (schema v16, `key_policies`).
-- With no limit or policy stored (one probe of each empty table) or no keyed row among the
-- first n, it claims as before limits existed.
--
-- `claim_take.sql` then claims the picked rows (the transition, written once).
WITH RECURSIVE clk AS MATERIALIZED (
    SELECT LEAST($1::bigint, COALESCE($2::bigint, {now})) AS now
),
{candidates},
picked AS MATERIALIZED (
    SELECT u.id, u.priority, u.due, u.key
    FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired) u
    ORDER BY u.priority DESC, u.due, u.id
    LIMIT $3
),
gated AS MATERIALIZED (
    SELECT ((SELECT EXISTS (SELECT 1 FROM {s}.concurrency_limits))
        AND EXISTS (
            SELECT 1 FROM picked p JOIN {s}.concurrency_limits l
                ON l.key = p.key OR l.key IS NULL
            WHERE p.key IS NOT NULL
        )) OR ((SELECT EXISTS (SELECT 1 FROM {s}.key_policies))
        AND EXISTS (
            SELECT 1 FROM picked p JOIN {s}.key_policies l
                ON l.key = p.key OR l.key IS NULL
            WHERE p.key IS NOT NULL
        )) AS gated
),
{take}
