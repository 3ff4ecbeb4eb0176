-- lease-postgres schema version 12: the live leases of a concurrency key counted in a
-- snapshot of their own, so a claim counts, in one statement, the leases committed after it
-- started. The key gate's claim (`execution/claim_keyed.sql`) takes a key's advisory lock
-- and then calls this: a VOLATILE PL/pgSQL function's query takes a fresh snapshot under
-- READ COMMITTED, so it sees every lease the lock's previous holder committed before
-- releasing the lock (a SQL function could be inlined into the calling statement and count
-- in that statement's older snapshot). Under REPEATABLE READ or SERIALIZABLE the snapshot
-- would be the transaction's: refused (SQLSTATE LT002) rather than counted stale.
CREATE FUNCTION {s}.live_leases(key text, now bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'LT002',
            MESSAGE = format('a keyed claim needs READ COMMITTED, not %s',
                             current_setting('transaction_isolation')),
            HINT = 'do not set default_transaction_isolation on the library''s connections';
    END IF;
    RETURN (SELECT count(*) FROM {s}.executions x
            WHERE x.concurrency_key = key AND x.status = 'running'
              AND x.lease_expires_at > now);
END
$$;
