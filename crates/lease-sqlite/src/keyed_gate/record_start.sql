INSERT INTO lease_rate_starts (namespace, key, at, n) VALUES (?1, ?2, ?3, 1)
ON CONFLICT (namespace, key, at) DO UPDATE SET n = n + 1
