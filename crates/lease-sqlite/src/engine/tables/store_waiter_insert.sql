-- ?1 namespace, ?2 store, ?3 key, ?4 waiter: registers the waiter once.
INSERT INTO lease_store_waiters (namespace, store, key, execution_id) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT DO NOTHING
