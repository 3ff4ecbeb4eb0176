INSERT INTO lease_wake_log (namespace, seq, origin, at)
SELECT ?1, coalesce(max(seq), 0) + 1, ?2, ?3 FROM lease_wake_log WHERE namespace = ?1
RETURNING seq
