-- Every row of one namespace (?1), table by table. The schema, other namespaces and the
-- namespace's token counter stay (tokens keep rising if the namespace is used again).
DELETE FROM lease_executions WHERE namespace = ?1;
DELETE FROM lease_steps WHERE namespace = ?1;
DELETE FROM lease_stores WHERE namespace = ?1;
DELETE FROM lease_store_entries WHERE namespace = ?1;
DELETE FROM lease_store_receipts WHERE namespace = ?1;
DELETE FROM lease_starts WHERE namespace = ?1;
DELETE FROM lease_wake_log WHERE namespace = ?1;
DELETE FROM lease_effects WHERE namespace = ?1;
DELETE FROM lease_store_waiters WHERE namespace = ?1;
DELETE FROM lease_paused WHERE namespace = ?1;
DELETE FROM lease_limits WHERE namespace = ?1;
DELETE FROM lease_attempt_limits WHERE namespace = ?1;
DELETE FROM lease_rate_limits WHERE namespace = ?1;
DELETE FROM lease_ordered_keys WHERE namespace = ?1;
DELETE FROM lease_rate_starts WHERE namespace = ?1;
