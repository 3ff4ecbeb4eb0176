-- lease-sqlite schema version 8: each execution's priority (-1000..=1000, 0 by default) and
-- concurrency key (NULL: none), written at admission and never changed.
ALTER TABLE lease_executions ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lease_executions ADD COLUMN concurrency_key TEXT;
