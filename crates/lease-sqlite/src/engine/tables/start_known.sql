SELECT target FROM lease_starts WHERE namespace = ?1 AND request_id = ?2
