SELECT kind, workflow FROM lease_paused WHERE namespace = ?1 ORDER BY kind, workflow
