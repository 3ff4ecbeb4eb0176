-- lease-sqlite schema version 14: browsing by a workflow and a key together.
--
-- lease_executions_by_key_workflow: a list filtered on a key and a workflow pages through
-- this index (one range per status when no status is given), so a page reads only the
-- executions it lists. Before, it walked the key's index and tested the workflow on each
-- row, so the page grew with the key's executions of other workflows (at 10^6 stored, a
-- hundred times the page at 10^3).
CREATE INDEX lease_executions_by_key_workflow
    ON lease_executions (namespace, concurrency_key, workflow, status, admitted_seq)
    WHERE concurrency_key IS NOT NULL AND workflow IS NOT NULL;
