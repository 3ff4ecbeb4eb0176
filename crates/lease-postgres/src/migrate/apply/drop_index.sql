-- Drops index `{index}` of the schema without blocking its table's readers and writers.
DROP INDEX CONCURRENTLY IF EXISTS {s}.{index}
