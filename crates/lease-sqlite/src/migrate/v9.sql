-- lease-sqlite schema version 9 (priorities and concurrency limits).
--
-- lease_executions_claim_waiting now leads with priority: a claim walks one priority level
-- at a time (highest first), in (claim_due_at, id) order within the level, so it stays a
-- seek per level however many executions are stored.
-- lease_executions_keyed_live: the running rows of each concurrency key by lease expiry; a
-- claim counts a key's live leases (lease_expires_at > now) with one seek and range.
-- lease_limits: kind 'default' (key '') is the namespace default, kind 'key' one key's
-- limit; value in 1..=MAX_CONCURRENCY_LIMIT. No row: unlimited.
DROP INDEX lease_executions_claim_waiting;
CREATE INDEX lease_executions_claim_waiting
    ON lease_executions (namespace, priority, claim_due_at, id, claimable_at)
    WHERE claimable_at IS NOT NULL AND status <> 'running';
CREATE INDEX lease_executions_keyed_live
    ON lease_executions (namespace, concurrency_key, lease_expires_at)
    WHERE status = 'running' AND concurrency_key IS NOT NULL;
CREATE TABLE lease_limits (
    namespace TEXT    NOT NULL,
    kind      TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    value     INTEGER NOT NULL,
    PRIMARY KEY (namespace, kind, key)
) WITHOUT ROWID;
