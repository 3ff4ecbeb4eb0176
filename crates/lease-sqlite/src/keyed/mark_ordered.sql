INSERT INTO lease_ordered_keys (namespace, kind, key) VALUES (?1, ?2, ?3)
ON CONFLICT (namespace, kind, key) DO NOTHING
