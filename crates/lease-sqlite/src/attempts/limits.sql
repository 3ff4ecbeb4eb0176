SELECT workflow, value FROM lease_attempt_limits WHERE namespace = ?1 ORDER BY workflow
