-- `$1 request id, $2 target, $3 workflow, $4 input, $5 clock` -> (created, existing
-- target, notification count; a created target notifies its due time). A target id that already exists raises a unique violation on
-- `executions_pkey`, which rolls the mapping back too. (false, NULL): the request was
-- recorded by a transaction this snapshot cannot see; run it again.
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
