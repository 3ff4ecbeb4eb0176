-- lease-sqlite schema version 13: workflows' own redelivery policies and delivery history.
--
-- redelivery_policy: the workflow's own policy a claim kept on the row, as
-- 'base_ms,factor,cap_ms' (NULL: the handle's policy).
-- deliveries: the execution's delivery history as compact JSON (lease_core's
-- DeliveryHistory, at most 20 entries), written by the same UPDATE that writes the
-- transition, so it costs no statement of its own and goes with the row when purged.
-- lease_redelivery_policies: one row per workflow with a policy of its own.
ALTER TABLE lease_executions ADD COLUMN redelivery_policy TEXT;
ALTER TABLE lease_executions ADD COLUMN deliveries TEXT;
CREATE TABLE lease_redelivery_policies (
    namespace TEXT    NOT NULL,
    workflow  TEXT    NOT NULL,
    base_ms   INTEGER NOT NULL,
    factor    INTEGER NOT NULL,
    cap_ms    INTEGER NOT NULL,
    PRIMARY KEY (namespace, workflow)
) WITHOUT ROWID;
