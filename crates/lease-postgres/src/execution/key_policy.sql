-- The per-key policies of the row `e`'s key (schema v16), spliced as `{key_policy}`: one
-- row (ordered, starts, period): ordered when the key or the namespace default is marked;
-- the key's own rate, else the default's (starts and period NULL: no rate). Two probes of
-- the small `key_policies` table (unique on key).
(SELECT COALESCE(o.ordered, false) OR COALESCE(d.ordered, false) AS ordered,
    CASE WHEN o.rate_starts IS NOT NULL THEN o.rate_starts ELSE d.rate_starts END AS starts,
    CASE WHEN o.rate_starts IS NOT NULL THEN o.rate_period_ms ELSE d.rate_period_ms END
        AS period
 FROM (SELECT 1) one
 LEFT JOIN {s}.key_policies o ON o.key = e.concurrency_key
 LEFT JOIN {s}.key_policies d ON d.key IS NULL)
