-- The claim's candidates, spliced as `{candidates}` into `claim.sql` and the key gate's
-- `claim_walk.sql` (after their `clk`): the CTEs `levels`, `waiting` and `expired`, each
-- candidate as (id, priority, due, key), locked `FOR UPDATE SKIP LOCKED`, at most `$3` per
-- side. `{open}` is a further per-row condition (the key gate leaves out keys already at
-- their limit; `true` elsewhere).
--
-- `levels`: the priorities of waiting rows, highest first, one backward seek of
-- `executions_claim_waiting_by_priority (priority, sort_due, id)` each (a loose index
-- scan); read lazily, so a claim filled by the first level never seeks the next.
-- `waiting`: per level, that level's due rows in (sort_due, id) order, the index range
-- `priority = level AND sort_due <= now`; the outer LIMIT stops the walk after n rows, so
-- rows are locked only as they are taken. Levels holding only rows due later cost one empty
-- range each (at most 2001 levels): the equality makes `sort_due <= now` a bound the index
-- scan stops at (a row comparison `(priority, sort_due) <= (level, now)` is not one: it was
-- tried, and read every row of a level due later, 37 ms per level at 10^6 scheduled). Over
-- statistics taken while the table was (almost) empty the equality is estimated at ~1 row,
-- and a bitmap scan plus a sort of every due row looked cheaper than this walk; the
-- library's sessions run with `enable_bitmapscan = off` (`backend.rs` `SESSION_SETTINGS`).
levels AS (
    (SELECT e.priority FROM {s}.executions e
     WHERE e.claimable_at IS NOT NULL AND e.status <> 'running'
     ORDER BY e.priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT e.priority FROM {s}.executions e
            WHERE e.claimable_at IS NOT NULL AND e.status <> 'running'
              AND e.priority < l.priority
            ORDER BY e.priority DESC LIMIT 1)
    FROM levels l WHERE l.priority IS NOT NULL
),
waiting AS MATERIALIZED (
    SELECT w.id, w.priority, w.due, w.key
    FROM levels l CROSS JOIN LATERAL (
        SELECT e.id, e.priority, e.sort_due AS due, e.concurrency_key AS key
        FROM {s}.executions e
        WHERE e.priority = l.priority
          AND e.claimable_at IS NOT NULL AND e.status <> 'running'
          AND e.sort_due <= (SELECT now FROM clk)
          AND e.claimable_at + 0 <= (SELECT now FROM clk)
          AND {decodable} AND {unpaused} AND {open}
        ORDER BY e.sort_due, e.id
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    ) w
    WHERE l.priority IS NOT NULL
    LIMIT $3
),
expired AS MATERIALIZED (
    SELECT e.id, e.priority, e.sort_due AS due, e.concurrency_key AS key
    FROM {s}.executions e
    WHERE e.claimable_at IS NOT NULL AND e.status = 'running'
      AND e.claimable_at <= (SELECT now FROM clk) AND NOT {last_attempt}
      AND {decodable} AND {unpaused} AND {open}
    ORDER BY e.priority DESC, e.sort_due, e.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
