-- `$1 ids text[], $2 workflows text[], $3 inputs text[], $4 not_befores bigint[] (NULL:
-- due now), $5 clock, $6 priorities int[], $7 concurrency keys text[] (NULL: none), $8 trace
-- contexts text[] (NULL: none)` -> one row per item whose record this statement can see:
-- (item number from 1, the 20 execution columns, now, notification count), by item. The ids
-- must be distinct (`check_admit_batch`). `admit.sql` for every item in one statement:
-- rows are inserted in id order (two batches sharing ids wait instead of deadlocking),
-- an existing id is returned as stored. A missing item was inserted by a transaction that
-- committed after this statement's snapshot; run the statement again for it. One
-- notification: the earliest due time among the created rows. The admission order
-- (`admission_seq`, schema v16) follows the items, not the id order of the inserts.
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
    RETURNING {cols}, e.claimable_at
),
note AS MATERIALIZED ({notify} FROM ins HAVING count(*) > 0),
found AS (
    SELECT {cols} FROM ins e
    UNION ALL
    SELECT {cols} FROM {s}.executions e JOIN items i ON i.id = e.id
    WHERE NOT EXISTS (SELECT 1 FROM ins x WHERE x.id = e.id)
)
SELECT i.ord, {cols}, clk.now, (SELECT count(*) FROM note)
FROM items i JOIN found e ON e.id = i.id, clk
ORDER BY i.ord
