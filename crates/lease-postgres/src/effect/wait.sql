-- `$1 effect id, $2 execution` -> the effect's columns as effect.rs decodes them (no row:
-- unknown effect). Registers the owner's wait when `$2` owns the pending effect.
WITH cur AS MATERIALIZED (
    SELECT f.id, f.execution_id, f.result, f.begun_at, f.settled_at
    FROM {s}.effects f WHERE f.id = $1 FOR NO KEY UPDATE
),
reg AS (
    UPDATE {s}.effects f SET waiting = true FROM cur
    WHERE f.id = cur.id AND cur.execution_id = $2 AND cur.result IS NULL
)
SELECT cur.id, cur.execution_id, cur.result, cur.begun_at, cur.settled_at FROM cur
