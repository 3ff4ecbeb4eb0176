-- `$1 effect id, $2 execution, $3 result, $4 clock, $5 delays` -> (the effect's columns as
-- they were when this statement locked the row, now, notification count). No row: unknown
-- effect. Records `$3` when the effect is pending and `$2` owns it (the Pending branch of
-- EffectRecord::settle, which the caller applies to the returned row to report the
-- settlement), ends the wait and, when the owner waited, wakes it in the same statement:
-- the wake CTEs are request_wake's transition (`statements/wake.sql`) at the backend's now.
WITH clk AS MATERIALIZED (SELECT COALESCE($4::bigint, {now}) AS now),
cur AS MATERIALIZED (
    SELECT f.id, f.execution_id, f.result, f.begun_at, f.settled_at, f.waiting
    FROM {s}.effects f WHERE f.id = $1 FOR NO KEY UPDATE
),
settled AS (
    UPDATE {s}.effects f SET result = $3, settled_at = clk.now, waiting = false
    FROM cur, clk
    WHERE f.id = cur.id AND cur.execution_id = $2 AND cur.result IS NULL
    RETURNING cur.waiting
),
wake_targets AS (
    SELECT $2::text AS id, (SELECT now FROM clk) AS at, $5::bigint[] AS delays
    FROM settled WHERE settled.waiting
),
{wake}
SELECT cur.id, cur.execution_id, cur.result, cur.begun_at, cur.settled_at, clk.now,
    (SELECT count(*) FROM note)
FROM cur, clk
