-- Statement 2 (a fresh snapshot taken after the lock): `$1 store, $2 execution, $3 step
-- key, $4 entry key` -> (receipt exists, applied, previous, current value).
SELECT r.store_id IS NOT NULL, r.applied, r.previous,
       (SELECT value FROM {s}.store_entries WHERE store_id = $1 AND entry_key = $4)
FROM (SELECT 1) one
LEFT JOIN {s}.store_receipts r
    ON r.store_id = $1 AND r.execution_id = $2 AND r.step_key = $3
