SELECT kind, key, starts, period_ms FROM lease_rate_limits WHERE namespace = ?1 ORDER BY kind, key
