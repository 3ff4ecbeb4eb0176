INSERT INTO lease_store_receipts
    (namespace, store, execution_id, step_key, applied, previous)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
