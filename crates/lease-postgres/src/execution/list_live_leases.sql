-- `$1 limit, $2 clock` -> the running rows whose lease is live at the clock, each with now,
-- by (lease_expires_at, id): a walk of `executions_live` (v14) from the clock, stopping
-- after `limit` rows. The clock is an InitPlan (a scalar subquery), so it bounds the index
-- scan under a generic plan too. Rows `{decodable}` rejects are left out (`list_corrupt`).
WITH clk AS MATERIALIZED (SELECT COALESCE($2::bigint, {now}) AS now)
SELECT {cols}, (SELECT now FROM clk) AS now_ms
FROM {s}.executions e
WHERE e.status = 'running' AND e.lease_expires_at > (SELECT now FROM clk) AND {decodable}
ORDER BY e.lease_expires_at, e.id
LIMIT $1
