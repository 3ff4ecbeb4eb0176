-- `$1` the owner tag: the version row of a new version table, at version 0.
INSERT INTO {s}.lease_schema (owner, version) VALUES ($1, 0)
