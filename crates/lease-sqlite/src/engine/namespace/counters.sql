-- `$1 namespace` -> the namespace's last issued token and takeover count (no row: none yet).
SELECT last_token, takeovers FROM lease_counters WHERE namespace = ?1
