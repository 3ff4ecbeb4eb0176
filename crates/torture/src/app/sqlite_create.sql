-- The torture workflow's application table, in the lease database's own
-- file. No unique key on (execution, step): a step written twice must show up as two rows.
CREATE TABLE IF NOT EXISTS torture_app_rows (
    execution TEXT NOT NULL,
    step TEXT NOT NULL,
    token INTEGER NOT NULL,
    process INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    value TEXT NOT NULL
)
