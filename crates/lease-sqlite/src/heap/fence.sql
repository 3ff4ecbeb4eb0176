SELECT token, status, lease_expires_at, unacknowledged, attempt_limit
FROM lease_executions WHERE namespace = ?1 AND id = ?2
