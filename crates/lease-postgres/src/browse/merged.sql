-- As page.sql, for a filter on a workflow and/or a key without a status (schema v18): the
-- filter's index leads with the names, then the status, then the admission number, so it
-- is walked backwards from the cursor once per status (at most `$5` entries each, reading
-- only the admission number), the seven walks merged by admission number and cut to `$5`,
-- and those rows read by admission number (`executions_admitted`). A page reads at most
-- seven times `$5` index entries, whatever is stored. `{match}` tests the names on `i`;
-- `{unused}` states that the other parameters (the status among them) are NULL.
SELECT {cols}, e.admission_seq, COALESCE($6::bigint, {now})
FROM (
    SELECT m.admission_seq
    FROM unnest(ARRAY['admitted', 'running', 'suspended', 'completed', 'failed',
                      'cancelled', 'dead']::text[]) AS st(status)
    CROSS JOIN LATERAL (
        SELECT i.admission_seq
        FROM {s}.executions i
        WHERE {match}
          AND i.status = st.status
          AND i.admission_seq < COALESCE($4::bigint, 9223372036854775807)
        ORDER BY i.admission_seq DESC
        LIMIT $5
    ) m
    ORDER BY m.admission_seq DESC
    LIMIT $5
) p
JOIN {s}.executions e ON e.admission_seq = p.admission_seq AND e.admission_seq > 0
WHERE {unused}
ORDER BY e.admission_seq DESC
