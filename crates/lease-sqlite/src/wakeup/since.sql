SELECT seq, origin, at FROM lease_wake_log WHERE namespace = ?1 AND seq > ?2 ORDER BY seq
