-- `$1` the schema (unquoted), `$2` an index name -> whether it is valid (no row: no such
-- index). A concurrent build that failed leaves its index INVALID: not used by queries but
-- still maintained by every write, so it is dropped and built again.
SELECT i.indisvalid FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2
