-- `$1 store, $2 key` -> (store exists, entry value).
SELECT EXISTS (SELECT 1 FROM {s}.stores WHERE store_id = $1),
       (SELECT value FROM {s}.store_entries WHERE store_id = $1 AND entry_key = $2)
