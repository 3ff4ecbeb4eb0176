-- ?1 namespace, ?2 effect id, ?3 result, ?4 settled_at: records the first result of a
-- pending effect and ends its wait (the caller wakes the owner when it was waiting).
UPDATE lease_effects SET result = ?3, settled_at = ?4, waiting = 0
WHERE namespace = ?1 AND id = ?2 AND result IS NULL
