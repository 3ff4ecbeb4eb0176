SELECT coalesce(max(seq), 0) FROM lease_wake_log WHERE namespace = ?1
