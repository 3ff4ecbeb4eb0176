-- lease-postgres schema version 14: the live leases by expiry.
--
-- `list_live_leases` lists the running rows whose lease has not expired, soonest expiry
-- first, then by id, at most `limit`: the console's namespace page shows the first 50. No
-- earlier index orders running rows by their expiry (`executions_claim_expired` orders them
-- by claimable_at, which adds the redelivery delay and is NULL for a row that is not due;
-- `executions_live_by_key` holds keyed rows only), so without this one the list read and
-- sorted every running row. With it the list is one seek to the clock and a walk of `limit`
-- entries in (lease_expires_at, id) order, with no sort. The cost: a claim or renewal adds
-- one entry to this index as well (neither was a HOT update before: both change
-- claimable_at, which other indexes hold); acknowledged and released rows leave it.
CREATE INDEX CONCURRENTLY executions_live ON {s}.executions (lease_expires_at, id)
    WHERE status = 'running';
