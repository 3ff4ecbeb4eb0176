-- lease-postgres schema version 10: the claim's priority order.
--
-- Claims take higher priorities first, then (due, id). Version 7's waiting index listed
-- rows by (sort_due, id) only, so a claim in priority order would have read every due row
-- and sorted them. This index leads with the priority: a claim finds the levels in use one
-- backward seek each (highest first) and walks each level's due rows in (sort_due, id)
-- order with `sort_due <= now` as its range, stopping after n rows, as version 7's walk
-- did. With every row at the default priority (the common case) that is one seek for the
-- level, one for "no lower level", and the old walk. It replaces version 7's index (the
-- same rows, one more column), so a claim or acknowledgement still maintains one waiting
-- index. `executions_live_by_key` (version 9) counts a key's live leases for the limits.

CREATE INDEX CONCURRENTLY executions_claim_waiting_by_priority ON {s}.executions (priority, sort_due, id)
    WHERE claimable_at IS NOT NULL AND status <> 'running';

DROP INDEX CONCURRENTLY {s}.executions_claim_waiting;
