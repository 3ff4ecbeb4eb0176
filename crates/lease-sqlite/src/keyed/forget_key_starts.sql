DELETE FROM lease_rate_starts WHERE namespace = ?1 AND key = ?2
