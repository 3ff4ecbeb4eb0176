-- `$1 namespace` -> the namespace's takeover counter (no row: no token issued, none yet).
SELECT takeovers FROM lease_counters WHERE namespace = ?1
