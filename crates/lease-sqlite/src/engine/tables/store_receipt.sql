SELECT applied, previous FROM lease_store_receipts
WHERE namespace = ?1 AND store = ?2 AND execution_id = ?3 AND step_key = ?4
