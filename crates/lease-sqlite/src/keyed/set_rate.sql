INSERT INTO lease_rate_limits (namespace, kind, key, starts, period_ms) VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (namespace, kind, key) DO UPDATE SET starts = excluded.starts, period_ms = excluded.period_ms
WHERE starts <> excluded.starts OR period_ms <> excluded.period_ms
