-- ?1 namespace, ?2 execution id -> a row when the execution exists (decoded or not).
SELECT 1 FROM lease_executions WHERE namespace = ?1 AND id = ?2
