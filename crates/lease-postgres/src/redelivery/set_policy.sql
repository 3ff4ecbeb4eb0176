-- `$1 workflow, $2 base ms, $3 factor, $4 cap ms, $5 clock` -> (changed?, notification
-- count). Upserts the workflow's row of `redelivery_policies` (schema v17). Claims copy it
-- onto the rows they take, so it applies from each execution's next claim; a change
-- notifies "claimable now" (a shorter policy may make a row claimable sooner once it is
-- claimed under it; a longer one wakes dispatchers that claim nothing more, harmless).
WITH clk AS MATERIALIZED (SELECT COALESCE($5::bigint, {now}) AS now),
up AS (
    INSERT INTO {s}.redelivery_policies AS p (workflow, base_ms, factor, cap_ms)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (workflow) DO UPDATE
        SET base_ms = EXCLUDED.base_ms, factor = EXCLUDED.factor, cap_ms = EXCLUDED.cap_ms
    WHERE (p.base_ms, p.factor, p.cap_ms)
        IS DISTINCT FROM (EXCLUDED.base_ms, EXCLUDED.factor, EXCLUDED.cap_ms)
    RETURNING (SELECT now FROM clk) AS claimable_at
),
note AS MATERIALIZED ({notify} FROM up HAVING count(*) > 0)
SELECT EXISTS (SELECT 1 FROM up), (SELECT count(*) FROM note)
