-- lease-postgres schema version 17: workflows' own redelivery policies and each execution's
-- delivery history (docs/decisions/0017 and 0018).
--
-- `redelivery_policies`: one row per workflow with a policy of its own (base and cap in ms,
-- the factor). The claim copies the row of the execution's workflow onto the row it takes
-- (`redelivery_base_ms`, `redelivery_factor`, `redelivery_cap_ms`: all three, or none for
-- the handle's policy), as it copies `attempt_limit`; every delay computed after that
-- delivery reads the row alone (`claimable_after`), so a change applies from each
-- execution's next claim.
--
-- `deliveries`: the history as one compact jsonb value on the row, `{"e": earlier, "d":
-- [[token, claimed_at], ...]}` where an ended entry is `[token, claimed_at, ended_at, end,
-- error kind, error message]`. The statements that start and end deliveries rewrite it in
-- the UPDATE they already run (`history_claim`, `history_end`): no other table, statement
-- or round trip, and it goes with the row (purge) and stays with it (`retry_dead`).
CREATE TABLE {s}.redelivery_policies (
    workflow  text COLLATE "C" PRIMARY KEY,
    base_ms   bigint NOT NULL CHECK (base_ms >= 1),
    factor    bigint NOT NULL CHECK (factor BETWEEN 1 AND 4294967295),
    cap_ms    bigint NOT NULL,
    CHECK (cap_ms >= base_ms)
);

ALTER TABLE {s}.executions
    ADD COLUMN redelivery_base_ms bigint,
    ADD COLUMN redelivery_factor bigint,
    ADD COLUMN redelivery_cap_ms bigint,
    ADD COLUMN deliveries jsonb,
    ADD CONSTRAINT executions_redelivery_whole CHECK (
        (redelivery_base_ms IS NULL) = (redelivery_factor IS NULL)
        AND (redelivery_base_ms IS NULL) = (redelivery_cap_ms IS NULL));

-- The delay after `n` unacknowledged deliveries: the stamped policy's
-- `min(cap, base * factor^(n-1))` (exact: numeric), else the handle's table `delays`.
CREATE FUNCTION {s}.policy_delay(
    delays bigint[], n bigint, base bigint, factor bigint, cap bigint
) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN base IS NULL THEN {s}.redelivery_delay(delays, n)
        WHEN n <= 0 THEN 0::bigint
        WHEN factor = 1 THEN least(base, cap)
        -- Past 64 doublings every valid cap is reached; keeps the power small.
        ELSE least(cap::numeric, base * power(factor::numeric, least(n - 1, 64)))::bigint
    END
$$;

-- `claimable_from` with the row's stamped policy (`policy_delay`).
CREATE FUNCTION {s}.claimable_after(
    status text, due bigint, wake bigint, expires bigint, unacked bigint, ended bigint,
    delays bigint[], base bigint, factor bigint, cap bigint
) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN status IN ('completed', 'failed', 'cancelled', 'dead') THEN NULL
        WHEN status = 'running' THEN
            CASE
                WHEN least(due, wake) IS NULL THEN NULL
                WHEN expires IS NULL THEN least(due, wake)
                ELSE greatest(least(due, wake),
                    expires + {s}.policy_delay(delays, unacked + 1, base, factor, cap))
            END
        WHEN due IS NULL THEN NULL
        WHEN unacked = 0 OR ended IS NULL THEN due
        ELSE greatest(due, ended + {s}.policy_delay(delays, unacked, base, factor, cap))
    END
$$;

-- Closes the history's open entry (an entry of two elements) with `end_word` at `at`, with
-- the error note when there is one; a closed or empty history is unchanged.
CREATE FUNCTION {s}.history_end(
    h jsonb, end_word text, at bigint, kind text, message text
) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN jsonb_array_length(h -> 'd' -> -1) IS DISTINCT FROM 2 THEN h
        ELSE jsonb_set(h, '{d,-1}', jsonb_build_array(h -> 'd' -> -1 -> 0,
            h -> 'd' -> -1 -> 1, at, end_word, kind, message))
    END
$$;

-- Appends the open entry of lease `token` claimed at `at`, first closing an entry left open
-- by an expired lease (`expired_at` set: a takeover) as expired at that instant with the
-- lease-expired note, then dropping the oldest entry past 20 (counted in "e").
CREATE FUNCTION {s}.history_claim(
    h jsonb, token bigint, at bigint, expired_at bigint
) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN jsonb_array_length(a.d) > 20
        THEN jsonb_build_object('e', a.e + jsonb_array_length(a.d) - 20, 'd', a.d - 0)
        ELSE jsonb_build_object('e', a.e, 'd', a.d) END
    FROM (SELECT COALESCE(c.h -> 'd', '[]'::jsonb)
            || jsonb_build_array(jsonb_build_array(token, at)) AS d,
            COALESCE((c.h ->> 'e')::bigint, 0) AS e
        FROM (SELECT CASE WHEN expired_at IS NULL THEN h
            ELSE {s}.history_end(h, 'expired', expired_at, 'lease_expired',
                'the lease expired before the delivery was acknowledged') END AS h) c) a
$$;
