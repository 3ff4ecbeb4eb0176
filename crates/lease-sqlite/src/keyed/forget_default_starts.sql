DELETE FROM lease_rate_starts WHERE namespace = ?1 AND key NOT IN
    (SELECT key FROM lease_rate_limits WHERE namespace = ?1 AND kind = 'key')
