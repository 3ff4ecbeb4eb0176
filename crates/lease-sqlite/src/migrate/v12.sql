-- lease-sqlite schema version 12: ordered keys, start rates per key, browsing.
--
-- admitted_seq: the execution's place in its namespace's admission order, set once by the
-- insert (one more than the namespace's highest, read through lease_executions_admitted)
-- and never changed, so a VACUUM (which may renumber rowids) keeps the order. Rows stored
-- before this version take their rowid, the insertion order SQLite kept for them.
-- lease_executions_key_line: each key's executions that are not terminal, in admission
-- order; the head of an ordered key is its first entry (one seek).
-- lease_executions_admitted, _by_status, _by_workflow, _by_key: list_executions pages
-- newest first through one of them, whatever is stored.
-- lease_rate_limits / lease_ordered_keys: kind 'default' (key '') or 'key', as lease_limits.
-- lease_rate_starts: the claim instants of rate-limited keys (n claims at instant at),
-- pruned to the window by each claim that records one.
ALTER TABLE lease_executions ADD COLUMN admitted_seq INTEGER NOT NULL DEFAULT 0;
UPDATE lease_executions SET admitted_seq = rowid;
CREATE INDEX lease_executions_admitted
    ON lease_executions (namespace, admitted_seq);
CREATE INDEX lease_executions_by_status
    ON lease_executions (namespace, status, admitted_seq);
CREATE INDEX lease_executions_by_workflow
    ON lease_executions (namespace, workflow, status, admitted_seq)
    WHERE workflow IS NOT NULL;
CREATE INDEX lease_executions_by_key
    ON lease_executions (namespace, concurrency_key, status, admitted_seq)
    WHERE concurrency_key IS NOT NULL;
CREATE INDEX lease_executions_key_line
    ON lease_executions (namespace, concurrency_key, admitted_seq)
    WHERE concurrency_key IS NOT NULL
      AND status NOT IN ('completed', 'failed', 'cancelled', 'dead');
CREATE TABLE lease_rate_limits (
    namespace TEXT    NOT NULL,
    kind      TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    starts    INTEGER NOT NULL,
    period_ms INTEGER NOT NULL,
    PRIMARY KEY (namespace, kind, key)
) WITHOUT ROWID;
CREATE TABLE lease_ordered_keys (
    namespace TEXT NOT NULL,
    kind      TEXT NOT NULL,
    key       TEXT NOT NULL,
    PRIMARY KEY (namespace, kind, key)
) WITHOUT ROWID;
CREATE TABLE lease_rate_starts (
    namespace TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    at        INTEGER NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (namespace, key, at)
) WITHOUT ROWID;
