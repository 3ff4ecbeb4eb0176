-- lease-postgres schema version 21: the schema's takeover counter (`status_counts`'s
-- `takeovers`): claims that took over a lease that ran out unacknowledged, since the schema
-- was created. One row, added to by the claim statement itself (`execution/claim_take.sql`,
-- `counted`) only when the claim took over at least one lease, so a claim that takes over
-- nothing (the drain's) neither locks nor writes it and concurrent workers do not wait for
-- each other on it. Purges never lower it.
CREATE TABLE {s}.takeovers (
    one   boolean PRIMARY KEY DEFAULT true CHECK (one),
    total bigint NOT NULL DEFAULT 0 CHECK (total >= 0)
);
INSERT INTO {s}.takeovers DEFAULT VALUES;
