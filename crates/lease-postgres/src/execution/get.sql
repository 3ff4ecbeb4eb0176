-- `$1 id, $2 clock` -> the stored record and now.
SELECT {cols}, COALESCE($2::bigint, {now}) FROM {s}.executions e WHERE e.id = $1
