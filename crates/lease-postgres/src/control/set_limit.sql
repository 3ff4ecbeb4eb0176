-- `$1 key (NULL: the namespace default), $2 limit, $3 clock` -> (changed?, notification
-- count). Upserts the scope's row of `concurrency_limits`; a changed limit notifies
-- "claimable now" (a raised one frees places; a lowered one wakes dispatchers that then
-- claim nothing more, which is harmless). Claims read the table in their own statements.
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now),
up AS (
    INSERT INTO {s}.concurrency_limits AS l (key, max_leases) VALUES ($1, $2)
    ON CONFLICT (key) DO UPDATE SET max_leases = EXCLUDED.max_leases
    WHERE l.max_leases IS DISTINCT FROM EXCLUDED.max_leases
    RETURNING (SELECT now FROM clk) AS claimable_at
),
note AS MATERIALIZED ({notify} FROM up HAVING count(*) > 0)
SELECT EXISTS (SELECT 1 FROM up), (SELECT count(*) FROM note)
