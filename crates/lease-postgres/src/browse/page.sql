-- `$1 status, $2 workflow, $3 concurrency key (each NULL: any), $4 the cursor's admission
-- number (NULL: from the newest), $5 limit, $6 clock` -> the execution columns, the row's
-- admission number and now, newest admitted first (schema v16). `{lead}` is the one
-- filter field walked through its index in admission order (`executions_admitted_by_*`,
-- or `executions_admitted` for no filter); the other fields are tested per row in a form
-- no index matches (`|| ''`), so the generic plan always walks the lead index backwards
-- from the cursor and stops after `$5` rows.
SELECT {cols}, e.admission_seq, COALESCE($6::bigint, {now})
FROM {s}.executions e
WHERE {lead}
  AND e.admission_seq < COALESCE($4::bigint, 9223372036854775807)
  AND {rest}
ORDER BY e.admission_seq DESC
LIMIT $5
