-- `$1 effect id, $2 execution, $3 clock` -> (execution exists, then the effect's columns as
-- effect.rs decodes them and whether this statement created it; NULLs when the execution is
-- unknown). The execution row is locked FOR KEY SHARE, so a concurrent purge cannot delete
-- it under a new effect. An existing effect is returned as committed (the no-op DO UPDATE
-- returns the newest version even when this statement's snapshot cannot see it) and is
-- not changed; `xmax = 0` only on a row this statement inserted.
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
owner AS MATERIALIZED (
    SELECT e.id FROM {s}.executions e WHERE e.id = $2 FOR KEY SHARE
),
ins AS (
    INSERT INTO {s}.effects AS f (id, execution_id, begun_at)
    SELECT $1, owner.id, clk.now FROM owner, clk
    ON CONFLICT (id) DO UPDATE SET execution_id = f.execution_id
    RETURNING f.id, f.execution_id, f.result, f.begun_at, f.settled_at, (f.xmax = 0) AS created
)
SELECT EXISTS (SELECT 1 FROM owner), ins.id, ins.execution_id, ins.result, ins.begun_at,
    ins.settled_at, ins.created
FROM (SELECT 1) one LEFT JOIN ins ON true
