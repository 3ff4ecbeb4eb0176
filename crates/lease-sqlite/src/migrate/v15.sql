-- lease-sqlite schema version 15: the keyed indexes a claim and an acknowledgement write.
--
-- A write of a keyed execution rewrote every index whose columns or condition name a
-- column it sets (status, lease_expires_at): lease_executions_keyed_live (a key's running
-- rows by expiry), lease_executions_key_line (a key's executions that are not terminal, in
-- admission order) and lease_executions_by_key beside the indexes every execution has.
-- The three lead with the key, so each commit of a drain dirtied a page per key it touched
-- in each of them: carrying a key halved the SQLite drain with no control set at all. Both
-- gate reads now walk lease_executions_by_key, which gains the lease expiry as a last
-- column: a key's live leases are its 'running' range filtered on the expiry inside the
-- index (the same entries the dropped index held, plus expired leases not taken over yet),
-- and an ordered key's line is its 'admitted', 'running' and 'suspended' ranges merged in
-- admission order (three seeks where there was one).
DROP INDEX lease_executions_key_line;
DROP INDEX lease_executions_keyed_live;
DROP INDEX lease_executions_by_key;
CREATE INDEX lease_executions_by_key
    ON lease_executions (namespace, concurrency_key, status, admitted_seq, lease_expires_at)
    WHERE concurrency_key IS NOT NULL;
