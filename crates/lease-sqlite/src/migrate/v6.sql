-- lease-sqlite schema version 6: effects (RFC 004, reduced) and store waiters.
--
-- lease_effects: one row per effect id and namespace. `result` is NULL while the effect is
-- pending and the first settled result (canonical JSON text) afterwards, with `settled_at`
-- set in the same write; `waiting` is 1 while the owner waits for the settle. The
-- (namespace, execution_id) index lets purge_terminal delete an execution's effects.
CREATE TABLE lease_effects (
    namespace    TEXT NOT NULL,
    id           TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    result       TEXT,
    begun_at     INTEGER NOT NULL,
    settled_at   INTEGER,
    waiting      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, id)
) WITHOUT ROWID;
CREATE INDEX lease_effects_execution ON lease_effects (namespace, execution_id);

-- lease_store_waiters: one-shot registrations, taken by the next applied update of the
-- entry (store, key).
CREATE TABLE lease_store_waiters (
    namespace    TEXT NOT NULL,
    store        TEXT NOT NULL,
    key          TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    PRIMARY KEY (namespace, store, key, execution_id)
) WITHOUT ROWID;
CREATE INDEX lease_store_waiters_execution ON lease_store_waiters (namespace, execution_id);
