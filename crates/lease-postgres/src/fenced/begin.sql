-- The message that opens a fenced transaction: `$1` the lease's expiry, `$2` the clock
-- (NULL: the database's). Sets both limits to [`stall_bound_ms`]'s value, computed on the
-- backend clock in the same round trip as `BEGIN`, and `plan_cache_mode`,
-- `enable_bitmapscan` and `enable_seqscan` back to PostgreSQL's defaults for the
-- application's statements (the library's connections force generic plans and no bitmap
-- or sequential scans for its own, `backend.rs` `SESSION_SETTINGS`; JIT stays off).
--
-- `BEGIN` comes last. The statements of one message before it run in the message's
-- implicit transaction, which `BEGIN` turns into the explicit one, keeping its isolation
-- level (pinned by `SET TRANSACTION`, whatever the session's default) and its
-- transaction-local settings. So if anything in the message fails, the implicit
-- transaction is rolled back and the connection is left idle, outside any transaction: a
-- `BEGIN` first would leave it in an aborted transaction, which sqlx 0.9 returns to the
-- pool as it is (its next user gets SQLSTATE 25P02).
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
SELECT set_config('idle_in_transaction_session_timeout', b.ms::text, true),
       set_config('lock_timeout', b.ms::text, true),
       set_config('plan_cache_mode', 'auto', true),
       set_config('enable_bitmapscan', 'on', true),
       set_config('enable_seqscan', 'on', true)
FROM (SELECT least(greatest($1 - COALESCE($2, {now}), {floor}), {ceiling}) AS ms) b;
BEGIN
