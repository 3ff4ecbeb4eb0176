-- The application's table of the fenced rows, in the lease's own file.
CREATE TABLE IF NOT EXISTS bench_charges (order_id TEXT NOT NULL, amount INTEGER NOT NULL)
