-- `$1` the schema (unquoted) -> (whether it has a version table, how many relations it
-- holds).
SELECT to_regclass(format('%I.lease_schema', $1::text)) IS NOT NULL,
    (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1)
