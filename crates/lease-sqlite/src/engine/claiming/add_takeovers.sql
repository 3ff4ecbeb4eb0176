-- `$1 namespace, $2 n`: adds the `n` takeovers of one claim to the namespace's counter. Run
-- only by a claim that took over an expired lease, after it stored its last token (so the
-- row exists), in the claim's transaction.
UPDATE lease_counters SET takeovers = takeovers + ?2 WHERE namespace = ?1
