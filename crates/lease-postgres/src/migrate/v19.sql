-- lease-postgres schema version 19: the latest delivery lives in the row's columns, not in
-- the `deliveries` jsonb (docs/decisions/0018-delivery-history.md).
--
-- `delivery_claimed_at`: when the claim issued the row's current lease token; NULL when
-- the row's latest delivery is in `deliveries` already (or there was none). While it is
-- set, the row's columns describe that delivery: its token is `token`; a running row's
-- delivery is open (or expired, as `get` reads the row); a completed or failed row's was
-- acknowledged at `last_delivery_ended_at`. A claim folds the delivery before it into the
-- jsonb (a takeover: expired at its expiry) and an end the columns cannot describe later
-- (a release, a suspension, a cancel, a death, `retry_dead`) folds the delivery it ends,
-- each in the UPDATE it already runs; the plain drain (a first claim, then a terminal
-- acknowledgement) writes no jsonb at all. Rows stored before this version keep their
-- latest entry in the jsonb (NULL here), which `history_fold` closes as before.
ALTER TABLE {s}.executions ADD COLUMN delivery_claimed_at bigint;

-- The history `h` with the delivery the row held folded in, then only the last `keep`
-- entries kept (the dropped ones counted in "e"). With `claimed_at` (the row described
-- the delivery), the delivery of lease `token` is appended as ended by `end_word` at
-- `ended_at` with the error note; without it (a row stored before version 19, or no
-- delivery in the row), the jsonb's open entry, if any, is closed the same way when
-- `end_word` is given. A NULL history with nothing to fold stays NULL.
CREATE FUNCTION {s}.history_fold(
    h jsonb, token bigint, claimed_at bigint, ended_at bigint, end_word text, kind text,
    message text, keep integer
) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN COALESCE(jsonb_array_length(a.h -> 'd'), 0) <= keep THEN a.h
        ELSE jsonb_build_object(
            'e', COALESCE((a.h ->> 'e')::bigint, 0) + jsonb_array_length(a.h -> 'd') - keep,
            'd', COALESCE((SELECT jsonb_agg(t.x ORDER BY t.o)
                FROM jsonb_array_elements(a.h -> 'd') WITH ORDINALITY AS t(x, o)
                WHERE t.o > jsonb_array_length(a.h -> 'd') - keep), '[]'::jsonb))
    END
    FROM (SELECT CASE
        WHEN claimed_at IS NOT NULL THEN jsonb_build_object(
            'e', COALESCE((h ->> 'e')::bigint, 0),
            'd', COALESCE(h -> 'd', '[]'::jsonb) || jsonb_build_array(
                jsonb_build_array(token, claimed_at, ended_at, end_word, kind, message)))
        WHEN end_word IS NOT NULL THEN {s}.history_end(h, end_word, ended_at, kind, message)
        ELSE h END AS h) a
$$;

-- Every statement appends through `history_fold` now.
DROP FUNCTION {s}.history_claim;
