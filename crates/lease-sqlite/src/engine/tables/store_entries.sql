SELECT key, value FROM lease_store_entries WHERE namespace = ?1 AND store = ?2
