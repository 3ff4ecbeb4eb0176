-- Store update, statement 1 of its transaction: `$1 store` -> a row when the store exists,
-- locked against concurrent updates of the same store.
SELECT store_id FROM {s}.stores WHERE store_id = $1 FOR NO KEY UPDATE
