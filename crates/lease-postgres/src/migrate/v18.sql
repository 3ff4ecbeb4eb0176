-- lease-postgres schema version 18: every browse filter walks an index of all the fields it
-- filters on (docs/decisions/0024-browse-and-counts.md).
--
-- Before, a page filtered on a workflow or a key walked that name's index in admission
-- order and tested the status (and the other name) on each row: a page of the few admitted
-- executions of a workflow with a long completed history read the whole history (at 10^6
-- stored, a hundred times the page at 10^3). The names' indexes now hold the status before
-- the admission number, and a workflow with a key has an index of its own, so a filter with
-- a status is one backward range walk, and one without is seven (one per status) merged.
CREATE INDEX CONCURRENTLY executions_browse_workflow
    ON {s}.executions (workflow, status, admission_seq)
    WHERE workflow IS NOT NULL;
CREATE INDEX CONCURRENTLY executions_browse_key
    ON {s}.executions (concurrency_key, status, admission_seq)
    WHERE concurrency_key IS NOT NULL;
CREATE INDEX CONCURRENTLY executions_browse_key_workflow
    ON {s}.executions (concurrency_key, workflow, status, admission_seq)
    WHERE concurrency_key IS NOT NULL AND workflow IS NOT NULL;
DROP INDEX CONCURRENTLY {s}.executions_admitted_by_workflow;
DROP INDEX CONCURRENTLY {s}.executions_admitted_by_key;
