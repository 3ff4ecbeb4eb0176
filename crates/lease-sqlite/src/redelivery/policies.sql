SELECT workflow, base_ms, factor, cap_ms FROM lease_redelivery_policies
WHERE namespace = ?1 ORDER BY workflow
