-- The schema's (owner, version).
SELECT owner, version FROM {s}.lease_schema
