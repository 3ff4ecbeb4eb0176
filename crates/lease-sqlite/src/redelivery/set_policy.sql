INSERT INTO lease_redelivery_policies (namespace, workflow, base_ms, factor, cap_ms)
VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (namespace, workflow) DO UPDATE SET
    base_ms = excluded.base_ms, factor = excluded.factor, cap_ms = excluded.cap_ms
