-- The execution columns, in the order `rows::execution` decodes them (priority and
-- concurrency key since schema v9, the admission's trace context since v13, the attempt
-- limit and the last error since v15, the stamped redelivery policy since v17).
e.id, e.workflow, e.input, e.status, e.token, e.lease_expires_at, e.due_at,
    e.wake_after_claim, e.unacknowledged_deliveries, e.last_delivery_ended_at,
    e.ever_suspended, e.outcome, e.priority, e.concurrency_key, e.trace_context,
    e.attempt_limit, e.last_error_kind, e.last_error_message, e.last_error_attempt,
    e.last_error_at, e.redelivery_base_ms, e.redelivery_factor, e.redelivery_cap_ms
