SELECT value FROM lease_meta WHERE key = ?1
