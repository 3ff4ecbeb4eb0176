-- The application's table of the fenced rows, in the run's schema.
CREATE TABLE IF NOT EXISTS {table} (order_id text NOT NULL, amount bigint NOT NULL)
