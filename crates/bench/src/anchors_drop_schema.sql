-- An anchor's own state on PostgreSQL: its schema, wiped before its run.
-- {schema} is a checked identifier ([a-z_][a-z0-9_]*), quoted.
DROP SCHEMA IF EXISTS "{schema}" CASCADE
