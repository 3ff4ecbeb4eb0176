-- ?1 namespace, ?2 effect id -> the effect row (columns in the order effect.rs decodes them).
SELECT id, execution_id, result, begun_at, settled_at, waiting
FROM lease_effects WHERE namespace = ?1 AND id = ?2
