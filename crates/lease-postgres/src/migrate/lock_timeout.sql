-- How long the migration transaction waits for any lock (its ALTER TABLE and CREATE INDEX
-- take locks that conflict with running claims): a waiting ACCESS EXCLUSIVE request holds
-- every later statement on the table behind it, so it gives up soon instead, changing
-- nothing (`LeaseError::Unavailable`; connecting again tries again).
SET LOCAL lock_timeout = '2s'
