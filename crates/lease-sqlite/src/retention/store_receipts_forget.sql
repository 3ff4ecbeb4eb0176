DELETE FROM lease_store_receipts WHERE namespace = ?1 AND execution_id = ?2
