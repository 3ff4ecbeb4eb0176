-- `$1 ids text[], $2 workflows text[], $3 inputs text[], $4 not_befores bigint[] (NULL:
-- due now), $5 clock, $6 priorities int[], $7 concurrency keys text[] (NULL: none), $8 trace
-- contexts text[] (NULL: none)` -> one row per item whose record this statement can see:
-- (item number from 1, created?, the 20 execution columns, now, notification count), by
-- item. The ids must be distinct (`check_admit_batch`). `admit.sql` for every item in one
-- statement: rows are inserted in id order (two batches sharing ids wait instead of
-- deadlocking), an existing id is returned as stored. A created row's columns are NULL:
-- it is exactly the admission as `ExecutionRecord::admitted` builds it at `now`, so the
-- client builds it and the statement sends back one short row per item instead of every
-- column of every record. Existing ids are looked up only when the insert created fewer
-- rows than there are items. A missing item was inserted by a transaction that committed
-- after this statement's snapshot; run the statement again for it. One notification: the
-- earliest due time among the created rows. The admission order (`admission_seq`, schema
-- v16) follows the items, not the id order of the inserts.
WITH clk AS MATERIALIZED (SELECT COALESCE($5::bigint, {now}) AS now),
items AS MATERIALIZED (
    SELECT u.ord, u.id, u.workflow, u.input, COALESCE(u.not_before, clk.now) AS due,
        u.priority, u.concurrency_key, u.trace_context,
        nextval('{s}.admission_order') AS seq
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $6::int[], $7::text[],
            $8::text[])
        WITH ORDINALITY AS u(id, workflow, input, not_before, priority, concurrency_key,
            trace_context, ord),
        clk
),
ins AS (
    INSERT INTO {s}.executions AS e
        (id, workflow, input, status, token, due_at, unacknowledged_deliveries,
         ever_suspended, claimable_at, priority, concurrency_key, trace_context, admission_seq)
    SELECT i.id, i.workflow, i.input, 'admitted', 0, i.due, 0, false, i.due, i.priority,
        i.concurrency_key, i.trace_context, i.seq
    FROM items i ORDER BY i.id
    ON CONFLICT (id) DO NOTHING
    RETURNING e.id, e.claimable_at
),
note AS MATERIALIZED ({notify} FROM ins HAVING count(*) > 0),
old AS MATERIALIZED (
    SELECT {cols} FROM {s}.executions e JOIN items i ON i.id = e.id
    WHERE (SELECT count(*) FROM ins) < (SELECT count(*) FROM items)
      AND NOT EXISTS (SELECT 1 FROM ins x WHERE x.id = e.id)
)
SELECT i.ord, x.id IS NOT NULL AS created, {cols}, clk.now, (SELECT count(*) FROM note)
FROM items i LEFT JOIN ins x ON x.id = i.id LEFT JOIN old e ON e.id = i.id, clk
WHERE x.id IS NOT NULL OR e.id IS NOT NULL
ORDER BY i.ord
