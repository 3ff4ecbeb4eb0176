DELETE FROM lease_attempt_limits WHERE namespace = ?1 AND workflow = ?2
