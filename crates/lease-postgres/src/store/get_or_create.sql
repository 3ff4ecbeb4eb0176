-- `$1 store, $2 keys, $3 values` -> rows (kind, key, value): a `created` or `existing`
-- header, then `entry` rows. No header: created by a transaction this snapshot cannot see;
-- run it again.
WITH ins AS (
    INSERT INTO {s}.stores (store_id) VALUES ($1) ON CONFLICT DO NOTHING RETURNING store_id
),
ent AS (
    INSERT INTO {s}.store_entries (store_id, entry_key, value)
    SELECT $1, u.k, u.v FROM unnest($2::text[], $3::text[]) AS u(k, v)
    WHERE EXISTS (SELECT 1 FROM ins)
    RETURNING entry_key, value
)
SELECT 'created' AS kind, NULL::text AS entry_key, NULL::text AS value FROM ins
UNION ALL SELECT 'entry', entry_key, value FROM ent
UNION ALL SELECT 'existing', NULL, NULL FROM {s}.stores x
    WHERE x.store_id = $1 AND NOT EXISTS (SELECT 1 FROM ins)
UNION ALL SELECT 'entry', x.entry_key, x.value FROM {s}.store_entries x
    WHERE x.store_id = $1 AND NOT EXISTS (SELECT 1 FROM ins)
