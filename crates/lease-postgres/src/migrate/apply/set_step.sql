-- `$1` the version reached, `$2` the part of the next migration reached.
UPDATE {s}.lease_schema SET version = $1, step = $2
