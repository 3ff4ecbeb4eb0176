SELECT last_token FROM lease_counters WHERE namespace = ?1
