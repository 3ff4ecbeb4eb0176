INSERT INTO lease_counters (namespace, last_token) VALUES (?1, ?2)
    ON CONFLICT (namespace) DO UPDATE SET last_token = excluded.last_token
