DELETE FROM lease_paused WHERE namespace = ?1 AND kind = ?2 AND workflow = ?3
