-- The fence of [`FencedTx::commit`]: `$1` id, `$2` token, `$3` clock. Statement 1 locks the
-- row and returns its post-lock token and status as fenced statements judge it
-- (`{held_status}`: a lease expired on its last attempt reads dead), what decides `Lost`
-- against bad input; statement 2 reads it again (the lock keeps it unchanged) and fails
-- with `division_by_zero` unless the token is current and the delivery not ended, which
-- aborts the transaction before `COMMIT`. The trailing `BEGIN` keeps the connection in the
-- transaction state sqlx's guard expects.
WITH clk AS (SELECT COALESCE($3::bigint, {now}) AS now)
SELECT e.token, {held_status} FROM {s}.executions e WHERE e.id = $1 FOR SHARE;
WITH clk AS (SELECT COALESCE($3::bigint, {now}) AS now)
SELECT 1 / count(*) FROM {s}.executions e
WHERE e.id = $1 AND e.token = $2 AND {held_status} = 'running';
COMMIT;
BEGIN
