SELECT kind, key FROM lease_ordered_keys WHERE namespace = ?1 ORDER BY kind, key
