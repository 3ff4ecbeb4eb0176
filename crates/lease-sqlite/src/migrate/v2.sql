CREATE TABLE lease_wake_log (
    namespace TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    origin    INTEGER NOT NULL,
    at        INTEGER NOT NULL,
    PRIMARY KEY (namespace, seq)
) WITHOUT ROWID;
CREATE INDEX lease_executions_horizon
    ON lease_executions (namespace, claimable_at)
    WHERE claimable_at IS NOT NULL;
