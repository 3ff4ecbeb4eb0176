-- `$1 key (NULL: every key)` -> (changed?, 0). Marks the scope ordered on its row of
-- `key_policies` (schema v16). Nothing to wake: marking only holds executions back.
WITH up AS (
    INSERT INTO {s}.key_policies AS p (key, ordered) VALUES ($1, true)
    ON CONFLICT (key) DO UPDATE SET ordered = true WHERE NOT p.ordered
    RETURNING p.key
)
SELECT EXISTS (SELECT 1 FROM up), 0::bigint
