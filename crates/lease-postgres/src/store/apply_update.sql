-- Statement 3: `$1 store, $2 entry key, $3 new value (NULL: absent), $4 applied, $5
-- execution, $6 step key, $7 previous, $8 clock, $9 delays` -> (notification count): writes
-- the entry when applied and records the receipt. An applied op also takes the entry's
-- store waiters (one-shot) and wakes them (`statements/wake.sql` at the backend's now).
WITH clk AS MATERIALIZED (SELECT COALESCE($8::bigint, {now}) AS now),
del AS (
    DELETE FROM {s}.store_entries
    WHERE store_id = $1 AND entry_key = $2 AND $4 AND $3::text IS NULL
    RETURNING 1
),
put AS (
    INSERT INTO {s}.store_entries (store_id, entry_key, value)
    SELECT $1, $2, $3 WHERE $4 AND $3::text IS NOT NULL
    ON CONFLICT (store_id, entry_key) DO UPDATE SET value = EXCLUDED.value
    RETURNING 1
),
taken AS (
    DELETE FROM {s}.store_waiters w WHERE w.store_id = $1 AND w.entry_key = $2 AND $4
    RETURNING w.execution_id
),
wake_targets AS (
    SELECT execution_id AS id, (SELECT now FROM clk) AS at, $9::bigint[] AS delays FROM taken
),
{wake}
INSERT INTO {s}.store_receipts (store_id, execution_id, step_key, applied, previous)
VALUES ($1, $5, $6, $4, $7)
RETURNING (SELECT count(*) FROM note)
