-- The deliberately broken commit of the race test: the token read in an unlocked
-- snapshot, then (after a 1 ms window widener) an ordinary `COMMIT` in a later message.
SELECT e.token, e.status FROM {s}.executions e, pg_sleep(0.001) WHERE e.id = $1
