-- `$1 workflow (NULL: the namespace default)` -> nothing. Deletes the scope's row of
-- `attempt_limits`: that scope is unlimited from each execution's next claim.
DELETE FROM {s}.attempt_limits l WHERE l.workflow IS NOT DISTINCT FROM $1
