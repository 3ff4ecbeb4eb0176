-- `$1 workflow (NULL: the namespace)` -> one row when the scope was newly paused, none when
-- it was paused already. Claims read the table in their own statement.
INSERT INTO {s}.paused_scopes (workflow) VALUES ($1)
ON CONFLICT DO NOTHING
RETURNING true
