-- lease-postgres schema version 11: a stored concurrency key no `ConcurrencyKey` can hold
-- makes a row undecodable. Version 9 added the `concurrency_key` column without teaching
-- `record_problem` the key's rules, so a key written by something else (empty, over 255
-- bytes, a control character) passed the claim's decodability test and failed the decoder
-- after the claim committed: a lease issued to nobody, on every claim that picked the row.
-- The key follows every name's rules (lease-core's `check_name`); NULL is no key. Version
-- 9's function is kept under a new name, as version 9 kept version 5's.
ALTER FUNCTION {s}.record_problem RENAME TO record_problem_v9;

CREATE FUNCTION {s}.record_problem(
    id text, workflow text, status text, token bigint, unacked bigint, outcome text,
    concurrency_key text
) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT COALESCE({s}.record_problem_v9(id, workflow, status, token, unacked, outcome),
        CASE
            WHEN octet_length(concurrency_key) NOT BETWEEN 1 AND 255
                THEN format('concurrency key is %s bytes, outside 1..=255',
                    octet_length(concurrency_key))
            WHEN concurrency_key ~ '[\u0001-\u001f\u007f-\u009f]'
                THEN 'concurrency key contains a control character'
        END)
$$;
