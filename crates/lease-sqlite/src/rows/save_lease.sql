UPDATE lease_executions SET lease_expires_at = ?3, claimable_at = ?4
WHERE namespace = ?1 AND id = ?2 AND corrupt IS NULL
