ALTER TABLE lease_executions ADD COLUMN corrupt TEXT;
CREATE INDEX lease_executions_corrupt
    ON lease_executions (namespace, id)
    WHERE corrupt IS NOT NULL;
