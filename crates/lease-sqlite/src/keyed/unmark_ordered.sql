DELETE FROM lease_ordered_keys WHERE namespace = ?1 AND kind = ?2 AND key = ?3
