-- The torture workflow's application table, in the run's schema of the
-- lease database. No unique key on (execution, step): a step written twice must show up as
-- two rows.
CREATE TABLE IF NOT EXISTS {table} (
    id bigserial PRIMARY KEY,
    execution text NOT NULL,
    step text NOT NULL,
    token bigint NOT NULL,
    process bigint NOT NULL,
    seq bigint NOT NULL,
    value text NOT NULL
)
