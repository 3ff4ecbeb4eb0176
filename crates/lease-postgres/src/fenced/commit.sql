-- The fence of [`FencedTx::commit`]: `$1` id, `$2` token. Statement 1 locks the row and
-- returns its post-lock token and status (what decides `Lost` against bad input);
-- statement 2 reads it again (the lock keeps it unchanged) and fails with
-- `division_by_zero` unless the token is current and the delivery not ended, which aborts
-- the transaction before `COMMIT`. The trailing `BEGIN` keeps the connection in the
-- transaction state sqlx's guard expects.
SELECT e.token, e.status FROM {s}.executions e WHERE e.id = $1 FOR SHARE;
SELECT 1 / count(*) FROM {s}.executions e
WHERE e.id = $1 AND e.token = $2 AND e.status = 'running';
COMMIT;
BEGIN
