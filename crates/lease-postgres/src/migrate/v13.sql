-- lease-postgres schema version 13: each execution's W3C trace context, written at
-- admission and never changed (the admitting request's `traceparent`, then one space and its
-- `tracestate` when it has one; NULL: none), so a delivery continues the admitting trace.
-- Not part of `record_problem`: a stored context that does not validate is read as none
-- (telemetry never makes an execution undeliverable).
ALTER TABLE {s}.executions ADD COLUMN trace_context text;
