-- `$1 namespace, $2 id, $3 execution id, $4 result, $5 begun_at, $6 settled_at`: stores an
-- effect record (a settle replaces its result and settle time; `waiting` is left as it is).
INSERT INTO lease_effects (namespace, id, execution_id, result, begun_at, settled_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (namespace, id) DO UPDATE SET result = excluded.result, settled_at = excluded.settled_at
