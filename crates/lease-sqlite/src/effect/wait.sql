-- ?1 namespace, ?2 effect id: the owner waits for the settle of a pending effect.
UPDATE lease_effects SET waiting = 1 WHERE namespace = ?1 AND id = ?2 AND result IS NULL
