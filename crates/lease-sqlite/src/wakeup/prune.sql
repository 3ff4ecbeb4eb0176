DELETE FROM lease_wake_log WHERE namespace = ?1 AND seq <= ?2
