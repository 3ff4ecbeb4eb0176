-- lease-postgres schema version 8: effects (RFC 004, reduced) and store waiters.
--
-- effects: one row per effect id. `result` is NULL while the effect is pending and the first
-- settled result (canonical JSON text) afterwards, set together with `settled_at`; `waiting`
-- is true while the owner waits for the settle. store_waiters: one-shot registrations, taken
-- by the next applied update of the entry. The execution_id indexes let purge_terminal delete
-- an execution's effects and registrations without scanning.

CREATE TABLE {s}.effects (
    id           text COLLATE "C" PRIMARY KEY,
    execution_id text COLLATE "C" NOT NULL,
    result       text,
    begun_at     bigint NOT NULL,
    settled_at   bigint,
    waiting      boolean NOT NULL DEFAULT false
);

CREATE INDEX effects_execution ON {s}.effects (execution_id);

CREATE TABLE {s}.store_waiters (
    store_id     text COLLATE "C" NOT NULL,
    entry_key    text COLLATE "C" NOT NULL,
    execution_id text COLLATE "C" NOT NULL,
    PRIMARY KEY (store_id, entry_key, execution_id)
);

CREATE INDEX store_waiters_execution ON {s}.store_waiters (execution_id);
