SELECT kind, key, value FROM lease_limits WHERE namespace = ?1 ORDER BY kind, key
