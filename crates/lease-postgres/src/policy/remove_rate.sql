-- `$1 key (NULL: the namespace default), $2 clock` -> (changed?, notification count).
-- Clears the scope's rate (the row goes when it does not mark the key ordered either) and
-- forgets the claim instants of every key no rate applies to any more (a rate set later
-- counts from then); a removed rate notifies "claimable now".
WITH clk AS MATERIALIZED (SELECT COALESCE($2::bigint, {now}) AS now),
cleared AS (
    UPDATE {s}.key_policies p SET rate_starts = NULL, rate_period_ms = NULL
    WHERE p.key IS NOT DISTINCT FROM $1 AND p.rate_starts IS NOT NULL AND p.ordered
    RETURNING (SELECT now FROM clk) AS claimable_at
),
gone AS (
    DELETE FROM {s}.key_policies p
    WHERE p.key IS NOT DISTINCT FROM $1 AND p.rate_starts IS NOT NULL AND NOT p.ordered
    RETURNING (SELECT now FROM clk) AS claimable_at
),
forgotten AS (
    DELETE FROM {s}.key_starts r
    WHERE ($1::text IS NULL OR r.key = $1)
      AND NOT EXISTS (
          SELECT 1 FROM {s}.key_policies p
          WHERE p.rate_starts IS NOT NULL AND p.key IS DISTINCT FROM $1
            AND (p.key = r.key OR p.key IS NULL))
),
changed AS (SELECT claimable_at FROM cleared UNION ALL SELECT claimable_at FROM gone),
note AS MATERIALIZED ({notify} FROM changed HAVING count(*) > 0)
SELECT EXISTS (SELECT 1 FROM changed), (SELECT count(*) FROM note)
