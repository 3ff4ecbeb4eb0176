-- lease-sqlite schema version 10: each execution's W3C trace context (the admitting
-- request's `traceparent`, then one space and its `tracestate` when it has one; NULL: none),
-- written at admission and never changed, so a delivery continues the admitting trace.
ALTER TABLE lease_executions ADD COLUMN trace_context TEXT;
