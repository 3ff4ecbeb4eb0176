DELETE FROM lease_effects WHERE namespace = ?1 AND execution_id = ?2
