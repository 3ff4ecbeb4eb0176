-- `$1 workflow (NULL: the namespace), $2 clock` -> (was paused?, notification count).
-- A resumed scope wakes dispatchers "claimable now", like admit.
WITH clk AS MATERIALIZED (SELECT COALESCE($2::bigint, {now}) AS now),
gone AS (
    DELETE FROM {s}.paused_scopes p WHERE p.workflow IS NOT DISTINCT FROM $1
    RETURNING (SELECT now FROM clk) AS claimable_at
),
note AS MATERIALIZED ({notify} FROM gone HAVING count(*) > 0)
SELECT EXISTS (SELECT 1 FROM gone), (SELECT count(*) FROM note)
