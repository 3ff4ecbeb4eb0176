-- `$1 key (NULL: every key), $2 clock` -> (changed?, notification count). Unmarks the
-- scope (the row goes when it holds no rate either); an unmarked scope notifies
-- "claimable now": executions its line held back may start.
WITH clk AS MATERIALIZED (SELECT COALESCE($2::bigint, {now}) AS now),
cleared AS (
    UPDATE {s}.key_policies p SET ordered = false
    WHERE p.key IS NOT DISTINCT FROM $1 AND p.ordered AND p.rate_starts IS NOT NULL
    RETURNING (SELECT now FROM clk) AS claimable_at
),
gone AS (
    DELETE FROM {s}.key_policies p
    WHERE p.key IS NOT DISTINCT FROM $1 AND p.ordered AND p.rate_starts IS NULL
    RETURNING (SELECT now FROM clk) AS claimable_at
),
changed AS (SELECT claimable_at FROM cleared UNION ALL SELECT claimable_at FROM gone),
note AS MATERIALIZED ({notify} FROM changed HAVING count(*) > 0)
SELECT EXISTS (SELECT 1 FROM changed), (SELECT count(*) FROM note)
