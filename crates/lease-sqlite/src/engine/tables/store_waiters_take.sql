-- ?1 namespace, ?2 store, ?3 key -> the registered waiters of the entry, removed (one-shot).
DELETE FROM lease_store_waiters WHERE namespace = ?1 AND store = ?2 AND key = ?3
RETURNING execution_id
