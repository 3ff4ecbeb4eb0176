INSERT INTO lease_starts (namespace, request_id, target) VALUES (?1, ?2, ?3)
