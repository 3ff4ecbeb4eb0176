-- `$1 namespace` -> 1 when the namespace holds an execution, a token counter, a store or a
-- setting (pause, limit): what a namespace anyone used leaves behind.
SELECT EXISTS (SELECT 1 FROM lease_executions WHERE namespace = ?1)
    OR EXISTS (SELECT 1 FROM lease_counters WHERE namespace = ?1)
    OR EXISTS (SELECT 1 FROM lease_stores WHERE namespace = ?1)
    OR EXISTS (SELECT 1 FROM lease_paused WHERE namespace = ?1)
    OR EXISTS (SELECT 1 FROM lease_limits WHERE namespace = ?1)
    OR EXISTS (SELECT 1 FROM lease_attempt_limits WHERE namespace = ?1)
