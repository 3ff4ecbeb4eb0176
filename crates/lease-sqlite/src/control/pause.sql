INSERT INTO lease_paused (namespace, kind, workflow) VALUES (?1, ?2, ?3)
ON CONFLICT (namespace, kind, workflow) DO NOTHING
