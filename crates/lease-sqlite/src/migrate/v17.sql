-- lease-sqlite schema version 17: the namespace's takeover counter (`status_counts`'s
-- `takeovers`): claims that took over a lease that ran out unacknowledged, since the
-- namespace was created. It sits on the namespace's counters row beside `last_token`, and
-- only a claim that takes over an expired lease adds to it, in the claim's transaction: a
-- first claim and an acknowledgement write nothing more than before. Purges never lower it.
-- Rows stored before this version start at 0.
ALTER TABLE lease_counters ADD COLUMN takeovers INTEGER NOT NULL DEFAULT 0;
