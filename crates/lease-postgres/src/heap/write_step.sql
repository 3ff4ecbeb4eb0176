-- `$1 id, $2 token, $3 step key, $4 attempt, $5 done, $6 response, $7 clock` -> (current
-- token, status as `{held_status}` judges it, recorded done, response, token, inserted;
-- NULLs when rejected). `FOR SHARE` on the execution row; an existing record is returned unchanged (the no-op `DO UPDATE`
-- returns the committed row even when this statement's snapshot cannot see it), with
-- `inserted` false (`xmax = 0` only on a row this statement inserted), so `step_in_tx`
-- can refuse to commit an effect whose record already existed.
WITH clk AS MATERIALIZED (SELECT COALESCE($7::bigint, {now}) AS now),
cur AS MATERIALIZED (
    SELECT e.token, {held_status} AS status FROM {s}.executions e WHERE e.id = $1 FOR SHARE
),
ins AS (
    INSERT INTO {s}.steps AS st (execution_id, step_key, step_attempt, done, response, token)
    SELECT $1, $3, $4, $5, $6, $2 FROM cur WHERE cur.token = $2 AND cur.status = 'running'
    ON CONFLICT (execution_id, step_key, step_attempt) DO UPDATE SET token = st.token
    RETURNING st.done, st.response, st.token, (st.xmax = 0) AS inserted
)
SELECT cur.token, cur.status, ins.done, ins.response, ins.token, ins.inserted
FROM cur LEFT JOIN ins ON true
