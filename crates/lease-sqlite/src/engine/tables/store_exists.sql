SELECT 1 FROM lease_stores WHERE namespace = ?1 AND store = ?2
