-- `` -> (workflow, limit) of the stored attempt limits: the namespace default (workflow
-- NULL) first, then workflows by name (byte order, the "C" collation).
SELECT l.workflow, l.max_attempts FROM {s}.attempt_limits l ORDER BY l.workflow NULLS FIRST
