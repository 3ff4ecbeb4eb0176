-- The last error an expired lease leaves (`LastError::expiry_note`, at the expiry, for the
-- attempt it ended), as SET items of an UPDATE of the row `e`: applied when the stored row
-- runs a delivery whose lease has expired at the statement's clock (a claim taking it over,
-- the claim storing a death by expiry, `retry_dead` or `cancel` of such a row, as
-- `effective` ends it); any other row keeps its last error. Needs the statement's `clk`
-- CTE (a running row without an expiry ended now, as in `effective`).
last_error_kind = CASE WHEN (e.status = 'running'
                AND COALESCE(e.lease_expires_at <= (SELECT now FROM clk), true))
            THEN 'lease_expired' ELSE e.last_error_kind END,
        last_error_message = CASE WHEN (e.status = 'running'
                AND COALESCE(e.lease_expires_at <= (SELECT now FROM clk), true))
            THEN 'the lease expired before the delivery was acknowledged'
            ELSE e.last_error_message END,
        last_error_attempt = CASE WHEN (e.status = 'running'
                AND COALESCE(e.lease_expires_at <= (SELECT now FROM clk), true))
            THEN LEAST(e.unacknowledged_deliveries + 1, 4294967295)
            ELSE e.last_error_attempt END,
        last_error_at = CASE WHEN (e.status = 'running'
                AND COALESCE(e.lease_expires_at <= (SELECT now FROM clk), true))
            THEN COALESCE(e.lease_expires_at, (SELECT now FROM clk)) ELSE e.last_error_at END
