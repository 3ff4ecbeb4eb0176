INSERT INTO lease_executions (namespace, id, status, token, lease_expires_at, due_at,
    wake_after_claim, unacknowledged, last_delivery_ended_at, ever_suspended, outcome,
    claim_due_at, claimable_at, attempt_limit, last_error, workflow, input, priority,
    concurrency_key, trace_context, admitted_seq)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
    ?20, COALESCE((SELECT admitted_seq FROM lease_executions
                   INDEXED BY lease_executions_admitted
                   WHERE namespace = ?1 ORDER BY admitted_seq DESC LIMIT 1), 0) + 1)
ON CONFLICT (namespace, id) DO NOTHING
