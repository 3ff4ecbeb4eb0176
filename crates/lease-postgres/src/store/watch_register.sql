-- Statement 2: `$1 store, $2 entry key, $3 waiter` -> the entry's value; registers the waiter
-- (once).
WITH reg AS (
    INSERT INTO {s}.store_waiters (store_id, entry_key, execution_id) VALUES ($1, $2, $3)
    ON CONFLICT DO NOTHING
)
SELECT (SELECT value FROM {s}.store_entries WHERE store_id = $1 AND entry_key = $2)
