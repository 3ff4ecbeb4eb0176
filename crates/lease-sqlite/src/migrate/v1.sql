CREATE TABLE lease_meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE lease_counters (
    namespace  TEXT PRIMARY KEY NOT NULL,
    last_token INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE lease_executions (
    namespace              TEXT NOT NULL,
    id                     TEXT NOT NULL,
    workflow               TEXT,
    input                  TEXT,
    status                 TEXT NOT NULL,
    token                  INTEGER NOT NULL,
    lease_expires_at       INTEGER,
    due_at                 INTEGER,
    wake_after_claim       INTEGER,
    unacknowledged         INTEGER NOT NULL,
    last_delivery_ended_at INTEGER,
    ever_suspended         INTEGER NOT NULL,
    outcome                TEXT,
    -- Derived on every write (see rows.rs): the due time the record would be claimed with,
    -- and the earliest time it becomes claimable absent further writes (NULL: never).
    claim_due_at           INTEGER,
    claimable_at           INTEGER,
    UNIQUE (namespace, id)
);
CREATE INDEX lease_executions_claim
    ON lease_executions (namespace, claim_due_at, id, claimable_at)
    WHERE claimable_at IS NOT NULL;
CREATE INDEX lease_executions_failing
    ON lease_executions (namespace, unacknowledged DESC, id)
    WHERE unacknowledged > 0;
CREATE INDEX lease_executions_running
    ON lease_executions (namespace, lease_expires_at)
    WHERE status = 'running';

CREATE TABLE lease_steps (
    namespace    TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    step_key     TEXT NOT NULL,
    step_attempt INTEGER NOT NULL,
    done         INTEGER NOT NULL,
    response     TEXT NOT NULL,
    token        INTEGER NOT NULL,
    UNIQUE (namespace, execution_id, step_key, step_attempt)
);

CREATE TABLE lease_stores (
    namespace TEXT NOT NULL,
    store     TEXT NOT NULL,
    PRIMARY KEY (namespace, store)
) WITHOUT ROWID;

CREATE TABLE lease_store_entries (
    namespace TEXT NOT NULL,
    store     TEXT NOT NULL,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    UNIQUE (namespace, store, key)
);

CREATE TABLE lease_store_receipts (
    namespace    TEXT NOT NULL,
    store        TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    step_key     TEXT NOT NULL,
    applied      INTEGER NOT NULL,
    previous     TEXT,
    UNIQUE (namespace, store, execution_id, step_key)
);

CREATE TABLE lease_starts (
    namespace  TEXT NOT NULL,
    request_id TEXT NOT NULL,
    target     TEXT NOT NULL,
    PRIMARY KEY (namespace, request_id)
) WITHOUT ROWID;
