-- `$1 workflow, $2 clock` -> (removed?, notification count). Deletes the workflow's row of
-- `redelivery_policies` (schema v17): its executions use the handle's policy from their
-- next claim. A removal notifies "claimable now", as a change does (`set_policy.sql`).
WITH clk AS MATERIALIZED (SELECT COALESCE($2::bigint, {now}) AS now),
gone AS (
    DELETE FROM {s}.redelivery_policies p WHERE p.workflow = $1
    RETURNING (SELECT now FROM clk) AS claimable_at
),
note AS MATERIALIZED ({notify} FROM gone HAVING count(*) > 0)
SELECT EXISTS (SELECT 1 FROM gone), (SELECT count(*) FROM note)
