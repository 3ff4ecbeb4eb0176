-- `$1 limit` -> (id, problem) of every row `record_problem` rejects, by id. A full scan:
-- an operator's call, never on a hot path.
SELECT e.id, p.problem
FROM {s}.executions e,
    LATERAL (SELECT {s}.record_problem(e.id, e.workflow, e.status, e.token,
        e.unacknowledged_deliveries, e.outcome, e.concurrency_key) AS problem) p
WHERE p.problem IS NOT NULL
ORDER BY e.id
LIMIT $1
