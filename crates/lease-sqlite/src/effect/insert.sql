-- ?1 namespace, ?2 effect id, ?3 owner execution, ?4 begun_at: a new pending effect.
INSERT INTO lease_effects (namespace, id, execution_id, begun_at) VALUES (?1, ?2, ?3, ?4)
