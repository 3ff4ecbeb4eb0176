-- The application's table of the fenced rows (issue 13 item 7), in the run's schema.
CREATE TABLE IF NOT EXISTS {table} (order_id text NOT NULL, amount bigint NOT NULL)
