-- `$1 key (NULL: the namespace default), $2 clock` -> (removed?, notification count).
-- Deletes the scope's row; a removed limit notifies "claimable now".
WITH clk AS MATERIALIZED (SELECT COALESCE($2::bigint, {now}) AS now),
gone AS (
    DELETE FROM {s}.concurrency_limits l WHERE l.key IS NOT DISTINCT FROM $1
    RETURNING (SELECT now FROM clk) AS claimable_at
),
note AS MATERIALIZED ({notify} FROM gone HAVING count(*) > 0)
SELECT EXISTS (SELECT 1 FROM gone), (SELECT count(*) FROM note)
