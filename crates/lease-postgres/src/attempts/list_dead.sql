-- `$1 after (NULL: from the first), $2 limit, $3 clock` -> stored records and now, by id:
-- the rows `get` reads as dead at the clock (stored dead, or running on their last attempt
-- with the lease expired), a walk of `executions_dead` (schema v15) after `$1`, stopping
-- after `$2` rows. Rows `{decodable}` rejects are left out (`list_corrupt`).
WITH clk AS MATERIALIZED (SELECT COALESCE($3::bigint, {now}) AS now)
SELECT {cols}, (SELECT now FROM clk) AS now_ms
FROM {s}.executions e
WHERE (e.status = 'dead' OR (e.status = 'running' AND {last_attempt}
        AND COALESCE(e.lease_expires_at <= (SELECT now FROM clk), true)))
  AND ($1::text IS NULL OR e.id > $1::text)
  AND {decodable}
ORDER BY e.id
LIMIT $2
