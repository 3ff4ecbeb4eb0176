-- `$1 status, $2 workflow, $3 concurrency key (each NULL: any), $4 the cursor's admission
-- number (NULL: from the newest), $5 limit, $6 clock` -> the execution columns, the row's
-- admission number and now, newest admitted first (schema v18), for a filter with a
-- status. `{match}` tests every filtered field, all of them columns of one index that ends
-- in the admission number (`executions_browse_*`), so the page is one backward walk of
-- that index from the cursor that stops after `$5` rows and reads no row it does not return;
-- `{unused}` states that the other parameters are NULL.
SELECT {cols}, e.admission_seq, COALESCE($6::bigint, {now})
FROM {s}.executions e
WHERE {match}
  AND e.admission_seq < COALESCE($4::bigint, 9223372036854775807)
  AND {unused}
ORDER BY e.admission_seq DESC
LIMIT $5
