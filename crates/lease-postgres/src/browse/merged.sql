-- As page.sql, for a filter without a status (schema v18; with no field at all since v22):
-- the walked index holds the filter's names (none: `executions_browse_status`), then the
-- status, then the admission number, so it is walked backwards from the cursor once per
-- status (at most `$5` entries each, reading only the status and the admission number),
-- the seven walks merged by admission number and cut to `$5`, and those rows read by
-- (status, admission number) through `executions_browse_status`. A page reads at most
-- seven times `$5` index entries, whatever is stored. `{match}` tests the names and the
-- status on `i`; `{unused}` states that the other parameters (the status among them) are
-- NULL.
SELECT {cols}, e.admission_seq, COALESCE($6::bigint, {now})
FROM (
    SELECT m.status, m.admission_seq
    FROM unnest(ARRAY['admitted', 'running', 'suspended', 'completed', 'failed',
                      'cancelled', 'dead']::text[]) AS st(status)
    CROSS JOIN LATERAL (
        SELECT st.status, i.admission_seq
        FROM {s}.executions i
        WHERE {match}
          AND i.admission_seq < COALESCE($4::bigint, 9223372036854775807)
        ORDER BY i.admission_seq DESC
        LIMIT $5
    ) m
    ORDER BY m.admission_seq DESC
    LIMIT $5
) p
JOIN {s}.executions e
    ON e.status COLLATE "C" = p.status AND e.admission_seq = p.admission_seq
WHERE {unused}
ORDER BY e.admission_seq DESC
