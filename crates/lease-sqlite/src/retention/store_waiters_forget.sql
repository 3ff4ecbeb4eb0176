DELETE FROM lease_store_waiters WHERE namespace = ?1 AND execution_id = ?2
