-- `$1 id, $2 clock` -> the stored record, now, then the history (schema v17, `deliveries`:
-- `{"e": earlier, "d": [[token, claimed_at, ended_at, end, kind, message], ...]}`) as the
-- earlier count and one array per entry field, oldest first (an open entry's missing
-- fields read NULL). No row: unknown execution.
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
    FROM jsonb_array_elements(COALESCE(e.deliveries -> 'd', '[]'::jsonb))
        WITH ORDINALITY AS t(x, o)
) h ON true
WHERE e.id = $1
