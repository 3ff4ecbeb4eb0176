SELECT at, n FROM lease_rate_starts WHERE namespace = ?1 AND key = ?2 AND at > ?3
