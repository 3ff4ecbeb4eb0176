-- `$1 limit` -> (id, problem) of every row `record_problem` rejects, by id. Rows are tested
-- with the inline `{decodable}` form (plain operators; it agrees with `record_problem`,
-- tests/decodable.rs), which is `executions_corrupt`'s predicate (schema v20): a walk of
-- that index by id, empty unless something but the library wrote rows (before, a scan of
-- every row: the console's namespace page lists these). `record_problem` names the problem
-- of the few found: calling the SQL function on every row cost 11.6 s over 110,000 rows.
SELECT e.id, {s}.record_problem(e.id, e.workflow, e.status, e.token,
        e.unacknowledged_deliveries, e.outcome, e.concurrency_key) AS problem
FROM {s}.executions e
WHERE NOT {decodable}
ORDER BY e.id
LIMIT $1
