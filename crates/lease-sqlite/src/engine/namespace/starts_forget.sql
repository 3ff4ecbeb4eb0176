-- `$1 namespace`: forgets every recorded claim instant (the engine writes them all back).
DELETE FROM lease_rate_starts WHERE namespace = ?1
