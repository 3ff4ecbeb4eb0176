-- Every ordinary table of schema $1: heap with TOAST, indexes, and the statistics
-- collector's dead tuples and autovacuum runs.
SELECT c.relname::text,
       pg_table_size(c.oid),
       pg_indexes_size(c.oid),
       COALESCE(s.n_dead_tup, 0),
       COALESCE(s.autovacuum_count, 0)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = $1 AND c.relkind = 'r'
ORDER BY c.relname
