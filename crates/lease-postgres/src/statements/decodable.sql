-- Whether the row `e` can be decoded: `{s}.record_problem(...) IS NULL` (migrations v5, v9, v11, v15),
-- written out inline. Claims and their horizon skip rows that cannot be decoded, so no
-- lease is ever issued for a record nobody can read. Each disjunct is one `WHEN` of
-- `record_problem`, in the same order; a row is undecodable when any of them is true (a
-- NULL disjunct, e.g. `octet_length` of a NULL workflow, is no problem there either), so
-- this is true exactly when `record_problem` returns NULL (`tests/decodable.rs` checks the
-- two agree on a row breaking each rule).
--
-- Why not call `record_problem` (measured): it is not inlined (its `format()` is only
-- STABLE), so every call goes through the SQL-function executor, and the planner estimates
-- `f(...) IS NULL` at 0.5% of the rows. That estimate made the claim's pick prefer a bitmap
-- scan of every claimable row (evaluating the function on each) plus a sort over the
-- `(sort_due, id)` index walk that stops after `limit` rows: 12.8 ms for a claim of one
-- over 3,000 due rows, against 0.05 ms for this form. A `CASE` is estimated at one half, so
-- the index walk wins whatever the statistics; its tests are plain operators, evaluated
-- only for rows that passed the cheaper index conditions. The regex is an `E''` literal so
-- it means the same whatever `standard_conforming_strings` says.
(CASE WHEN e.id IS NULL
        OR octet_length(e.id) NOT BETWEEN 1 AND 255
        OR e.id ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
        OR octet_length(e.workflow) NOT BETWEEN 1 AND 255
        OR e.workflow ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
        OR e.status IS NULL
        OR e.status NOT IN ('admitted', 'running', 'suspended', 'completed', 'failed',
            'cancelled', 'dead')
        OR e.token IS NULL OR e.token < 0
        OR e.unacknowledged_deliveries IS NULL
        OR e.unacknowledged_deliveries NOT BETWEEN 0 AND 4294967295
        OR (e.status IN ('completed', 'failed', 'cancelled') AND e.outcome IS NULL)
        OR octet_length(e.concurrency_key) NOT BETWEEN 1 AND 255
        OR e.concurrency_key ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
    THEN false ELSE true END)
