-- `` -> the paused scopes' workflow (NULL: the namespace), the namespace first, then
-- workflows by name (byte order, the "C" collation).
SELECT p.workflow FROM {s}.paused_scopes p ORDER BY p.workflow NULLS FIRST
