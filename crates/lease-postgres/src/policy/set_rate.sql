-- `$1 key (NULL: the namespace default), $2 starts, $3 period ms, $4 clock` -> (changed?,
-- notification count). Upserts the scope's rate on its row of `key_policies` (schema v16);
-- a changed rate notifies "claimable now" (a raised one frees starts; a lowered one wakes
-- dispatchers that then claim nothing more, which is harmless).
WITH clk AS MATERIALIZED (SELECT COALESCE($4::bigint, {now}) AS now),
up AS (
    INSERT INTO {s}.key_policies AS p (key, rate_starts, rate_period_ms) VALUES ($1, $2, $3)
    ON CONFLICT (key) DO UPDATE
        SET rate_starts = EXCLUDED.rate_starts, rate_period_ms = EXCLUDED.rate_period_ms
    WHERE (p.rate_starts, p.rate_period_ms)
        IS DISTINCT FROM (EXCLUDED.rate_starts, EXCLUDED.rate_period_ms)
    RETURNING (SELECT now FROM clk) AS claimable_at
),
note AS MATERIALIZED ({notify} FROM up HAVING count(*) > 0)
SELECT EXISTS (SELECT 1 FROM up), (SELECT count(*) FROM note)
