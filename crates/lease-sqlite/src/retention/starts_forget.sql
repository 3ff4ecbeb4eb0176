DELETE FROM lease_starts WHERE namespace = ?1 AND target = ?2
