-- Store waiter registration, statement 1 of its transaction: `$1 store, $2 waiter` ->
-- (waiter exists, store exists). Locks the store row FOR SHARE, which conflicts with a store
-- update's lock: an update that committed before is seen by statement 2 (a fresh snapshot),
-- one that commits after finds the registration. The waiter row FOR KEY SHARE, so a
-- concurrent purge cannot delete it under the registration.
WITH ex AS MATERIALIZED (SELECT e.id FROM {s}.executions e WHERE e.id = $2 FOR KEY SHARE),
st AS MATERIALIZED (SELECT x.store_id FROM {s}.stores x WHERE x.store_id = $1 FOR SHARE)
SELECT EXISTS (SELECT 1 FROM ex), EXISTS (SELECT 1 FROM st)
