DELETE FROM lease_redelivery_policies WHERE namespace = ?1 AND workflow = ?2
