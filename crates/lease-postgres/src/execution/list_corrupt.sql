-- `$1 limit` -> (id, problem) of every row `record_problem` rejects, by id. A full scan:
-- an operator's call, never on a hot path. Rows are first tested with the inline
-- `{decodable}` form (plain operators; it agrees with `record_problem`, tests/decodable.rs)
-- and `record_problem` names the problem of the few that fail it: calling the SQL function
-- on every row cost 11.6 s over 110,000 rows (the console's namespace page lists these).
SELECT e.id, {s}.record_problem(e.id, e.workflow, e.status, e.token,
        e.unacknowledged_deliveries, e.outcome, e.concurrency_key) AS problem
FROM {s}.executions e
WHERE NOT {decodable}
ORDER BY e.id
LIMIT $1
