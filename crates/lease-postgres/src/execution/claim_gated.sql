-- The key gate's second statement (issue 21 item 4), after `claim_walk.sql` in the same
-- transaction: `$1 request now, $2 clock, $3 limit, $4 lease ms, $5 delays, $6 ids text[]
-- (the walk's candidates, in claim order)` -> `claim.sql`'s rows (leases in claim order,
-- then the summary row). Its snapshot is taken after the walk's key locks were granted,
-- so each locked key's live leases are counted with every committed lease of every
-- earlier holder of the lock (lease_core::selection rule 3):
--
-- - `room`: per limited key, its limit minus its live leases (negative after a lowered
--   limit: nothing is taken);
-- - `picked`: the candidates in claim order, a keyed one only while it is among the first
--   `room` candidates of its key (a skipped candidate does not stop later ones), the first
--   n of those.
--
-- The candidates are locked by this transaction, so they are as the walk saw them. The
-- horizon leaves out rows due now whose key is at its limit after this claim.
WITH clk AS MATERIALIZED (
    SELECT LEAST($1::bigint, COALESCE($2::bigint, {now})) AS now
),
cand AS MATERIALIZED (
    SELECT e.id, e.priority, e.sort_due AS due, e.concurrency_key AS key, u.ord
    FROM unnest($6::text[]) WITH ORDINALITY AS u(id, ord)
    JOIN {s}.executions e ON e.id = u.id
),
room AS MATERIALIZED (
    SELECT e.concurrency_key AS key, {key_cap} - {key_live} AS room
    FROM (SELECT DISTINCT c.key AS concurrency_key FROM cand c WHERE c.key IS NOT NULL) e
),
ranked AS MATERIALIZED (
    SELECT c.id, c.priority, c.due, c.key, c.ord,
        row_number() OVER (PARTITION BY c.key ORDER BY c.ord) AS rank_in_key
    FROM cand c
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
