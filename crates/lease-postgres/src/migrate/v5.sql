-- lease-postgres schema version 5: rows the library cannot decode are never claimed (one
-- bad row must not stop every claim). Such rows can only be written by something else (the
-- column types allow what lease-core's types refuse). A claim decodes its rows after the
-- statement committed, so a claimed undecodable row would be a lease issued to nobody;
-- instead the claim (and its horizon) skip every row for which this returns a problem, and
-- `list_corrupt` lists them. The rules are exactly the decoder's (rows.rs, lease-core's
-- name and count types): names 1..=255 bytes without control characters (Unicode Cc:
-- U+0001-U+001F, U+007F-U+009F; text cannot hold U+0000), a known status, a non-negative
-- token, an unacknowledged count that fits a u32, and an outcome on every terminal row.

CREATE FUNCTION {s}.record_problem(
    id text, workflow text, status text, token bigint, unacked bigint, outcome text
) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN id IS NULL THEN 'execution id is NULL'
        WHEN octet_length(id) NOT BETWEEN 1 AND 255
            THEN format('execution id is %s bytes, outside 1..=255', octet_length(id))
        WHEN id ~ '[\u0001-\u001f\u007f-\u009f]'
            THEN 'execution id contains a control character'
        WHEN octet_length(workflow) NOT BETWEEN 1 AND 255
            THEN format('workflow name is %s bytes, outside 1..=255', octet_length(workflow))
        WHEN workflow ~ '[\u0001-\u001f\u007f-\u009f]'
            THEN 'workflow name contains a control character'
        WHEN status IS NULL
            OR status NOT IN ('admitted', 'running', 'suspended', 'completed', 'failed')
            THEN format('unknown status %L', status)
        WHEN token IS NULL OR token < 0 THEN format('invalid token %L', token)
        WHEN unacked IS NULL OR unacked NOT BETWEEN 0 AND 4294967295
            THEN format('unacknowledged count %L outside 0..=4294967295', unacked)
        WHEN status IN ('completed', 'failed') AND outcome IS NULL
            THEN 'terminal execution without an outcome'
    END
$$;
