-- `$1 namespace` -> every recorded claim instant of a rate-limited key, with its count.
SELECT key, at, n FROM lease_rate_starts WHERE namespace = ?1
