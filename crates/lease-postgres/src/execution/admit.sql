-- `$1 id, $2 workflow, $3 input, $4 clock, $5 not_before (NULL: due now), $6 priority,
-- $7 concurrency key (NULL: none), $8 trace context (NULL: none)` -> the record
-- (created or existing), now, and the notification count. No row: the id was inserted by a
-- transaction that committed after this statement's snapshot; run it again. A created row
-- notifies its due time (= its `claimable_at`); an existing one nothing.
WITH clk AS MATERIALIZED (SELECT COALESCE($4::bigint, {now}) AS now),
ins AS (
    INSERT INTO {s}.executions AS e
        (id, workflow, input, status, token, due_at, unacknowledged_deliveries,
         ever_suspended, claimable_at, priority, concurrency_key, trace_context)
    SELECT $1, $2, $3, 'admitted', 0, COALESCE($5::bigint, clk.now), 0, false,
        COALESCE($5::bigint, clk.now), $6, $7, $8
    FROM clk
    ON CONFLICT (id) DO NOTHING
    RETURNING {cols}, e.claimable_at
),
note AS MATERIALIZED ({notify} FROM ins HAVING count(*) > 0)
SELECT {cols}, clk.now, (SELECT count(*) FROM note) FROM ins e, clk
UNION ALL
SELECT {cols}, clk.now, 0 FROM {s}.executions e, clk
WHERE e.id = $1 AND NOT EXISTS (SELECT 1 FROM ins)
