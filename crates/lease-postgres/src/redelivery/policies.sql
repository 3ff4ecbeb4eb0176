-- -> (workflow, base ms, factor, cap ms) per row of `redelivery_policies`, by name.
SELECT p.workflow, p.base_ms, p.factor, p.cap_ms FROM {s}.redelivery_policies p
ORDER BY p.workflow
