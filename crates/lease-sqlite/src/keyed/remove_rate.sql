DELETE FROM lease_rate_limits WHERE namespace = ?1 AND kind = ?2 AND key = ?3
