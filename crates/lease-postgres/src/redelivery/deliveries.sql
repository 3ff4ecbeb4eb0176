-- `$1 id, $2 clock` -> the stored record, now, then the history as the earlier count and
-- one array per entry field, oldest first (an open entry's missing fields read NULL). The
-- entries are the `deliveries` jsonb's (schema v17: `{"e": earlier, "d": [[token,
-- claimed_at, ended_at, end, kind, message], ...]}`) followed by the delivery the row's
-- columns describe when `delivery_claimed_at` is set (schema v19): lease `token`, open on
-- a running row, acknowledged at `last_delivery_ended_at` on a completed or failed one. No
-- other status keeps that column set; one that did reads as an unknown end (a protocol
-- error) rather than as a made-up entry. No row: unknown execution.
SELECT {cols}, COALESCE($2::bigint, {now}), COALESCE((e.deliveries ->> 'e')::bigint, 0),
    h.tokens, h.claimed, h.ended, h.ends, h.kinds, h.messages
FROM {s}.executions e
LEFT JOIN LATERAL (
    SELECT array_agg((x ->> 0)::bigint ORDER BY o) AS tokens,
        array_agg((x ->> 1)::bigint ORDER BY o) AS claimed,
        array_agg((x ->> 2)::bigint ORDER BY o) AS ended,
        array_agg(x ->> 3 ORDER BY o) AS ends,
        array_agg(x ->> 4 ORDER BY o) AS kinds,
        array_agg(x ->> 5 ORDER BY o) AS messages
    FROM jsonb_array_elements(COALESCE(e.deliveries -> 'd', '[]'::jsonb)
        || CASE WHEN e.delivery_claimed_at IS NULL THEN '[]'::jsonb
            ELSE jsonb_build_array(jsonb_build_array(e.token, e.delivery_claimed_at,
                CASE WHEN e.status IN ('completed', 'failed') THEN e.last_delivery_ended_at END,
                CASE WHEN e.status = 'running' THEN NULL
                    WHEN e.status IN ('completed', 'failed') THEN 'acknowledged'
                    ELSE 'row status ' || e.status END)) END)
        WITH ORDINALITY AS t(x, o)
) h ON true
WHERE e.id = $1
