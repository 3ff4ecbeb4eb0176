-- The part of the next migration reached (add_step_column.sql).
SELECT step FROM {s}.lease_schema
