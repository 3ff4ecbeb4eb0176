DELETE FROM lease_steps WHERE namespace = ?1 AND execution_id = ?2
