-- lease-postgres schema version 20: the console's reads at any number of stored executions
-- (docs/decisions/0024-browse-and-counts.md).
--
-- The status index of browsing holds its status in the "C" collation, and only the page
-- filtered on a status alone tests the status in that collation (`browse.rs`). Before, a
-- page filtered on a status and a workflow (or key) could walk either that index or the
-- workflow's `executions_browse_workflow (workflow, status, admission_seq)`; the planner
-- takes the two filters as independent and their matches as spread evenly, so it costed
-- the status walk, which tests the workflow on each row, a little cheaper (46 against 49 at
-- 10^6), and a page of an admitted workflow's 50 newest read 40,000 admitted rows of other
-- workflows (15.7 ms instead of 0.2 ms). Now no other page can walk the status index.
-- Equality is the same in every deterministic collation, so the pages list the same rows;
-- `status_counts` counts one range of it per status, index entries only.
CREATE INDEX CONCURRENTLY executions_browse_status
    ON {s}.executions (status COLLATE "C", admission_seq);
DROP INDEX CONCURRENTLY {s}.executions_admitted_by_status;

-- The rows `list_corrupt` lists and `status_counts` counts apart: those the inline
-- decodable test (`statements/decodable.sql`, unqualified here) rejects. Empty in a store
-- only the library wrote, so both read nothing instead of testing every row; the test must
-- stay the statements' own word for word, or the planner cannot use it (a unit test holds
-- the two together).
CREATE INDEX CONCURRENTLY executions_corrupt ON {s}.executions (id)
    WHERE NOT (CASE WHEN id IS NULL
        OR octet_length(id) NOT BETWEEN 1 AND 255
        OR id ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
        OR octet_length(workflow) NOT BETWEEN 1 AND 255
        OR workflow ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
        OR status IS NULL
        OR status NOT IN ('admitted', 'running', 'suspended', 'completed', 'failed',
            'cancelled', 'dead')
        OR token IS NULL OR token < 0
        OR unacknowledged_deliveries IS NULL
        OR unacknowledged_deliveries NOT BETWEEN 0 AND 4294967295
        OR (status IN ('completed', 'failed', 'cancelled') AND outcome IS NULL)
        OR octet_length(concurrency_key) NOT BETWEEN 1 AND 255
        OR concurrency_key ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
    THEN false ELSE true END);

-- `list_failing`: the rows with unacknowledged deliveries, by count (the running rows
-- whose lease has expired, one more, are found through `executions_live`).
CREATE INDEX CONCURRENTLY executions_failing
    ON {s}.executions (unacknowledged_deliveries, id)
    WHERE unacknowledged_deliveries > 0;
