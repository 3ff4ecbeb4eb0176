-- Whether the row `e`'s current (or next-ended) delivery is the last its attempt limit
-- allows (`ExecutionRecord::expired_into_dead` before the expiry test): the counter plus
-- this delivery reaches the limit copied onto the row at its claim (schema v15).
(e.attempt_limit IS NOT NULL AND e.unacknowledged_deliveries + 1 >= e.attempt_limit)
