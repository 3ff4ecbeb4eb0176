-- `$1` the version just applied.
UPDATE {s}.lease_schema SET version = $1
