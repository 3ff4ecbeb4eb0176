INSERT INTO lease_limits (namespace, kind, key, value) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (namespace, kind, key) DO UPDATE SET value = excluded.value
