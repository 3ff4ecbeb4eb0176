INSERT INTO lease_store_entries (namespace, store, key, value) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (namespace, store, key) DO UPDATE SET value = excluded.value
