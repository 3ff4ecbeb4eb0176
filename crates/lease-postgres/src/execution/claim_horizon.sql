-- The claim's summary row: the clock it ran at, whether the claim was handed to the key
-- gate (`claim.sql`; then it claimed nothing), and the earliest `claimable_at` over the
-- schema's non-terminal executions after the claim: the new leases' (from `claimed`) and
-- every other row's, each part two index seeks (schema v22): rows not running on
-- `executions_horizon_waiting` (its status test in the "C" collation, as written here),
-- running rows on `executions_claim_expired`, the smaller value kept:
--
-- - a full claim (as many leases as asked; the dispatcher claims again at once): `unpicked`,
--   the smallest value in the statement's snapshot, skipping the rows this claim picked;
-- - a short claim: `later`, the smallest value above the claim's clock in the snapshot, and
--   `due_unlocked`, a row already due that no claim is taking. It reads `FOR KEY SHARE SKIP
--   LOCKED`: KEY SHARE conflicts only with `FOR UPDATE`, which only a claim's `picked`
--   takes, so it skips exactly the rows a concurrent claim is taking (that claim notifies
--   their new instant when it commits), never waits, and reads a row changed by a
--   transaction that committed after the snapshot in its newest version (dropped if no
--   longer due). Without it, every claim racing another for a row reported the row as due
--   and its dispatcher claimed again for nothing. A short claim met no due row it could
--   take, so this never locks a row another claim could pick (bar one made due after the
--   snapshot, for a moment).
--
-- Paused rows are left out, and (in the key gate's statement) rows due now whose key is
-- at its limit or holds them back by its ordering or rate after the claim (`{unblocked}`;
-- a held key's own instant, `key_wait`, is in the horizon): their key's live leases are in it, and an
-- acknowledgement, release or cancel of one notifies "now". Rows admitted after the
-- snapshot are absent (admission notifies). The horizon is later
-- than the truth only while a concurrent claim that holds a row rolls back, when the
-- dispatcher's backstop poll (and that claimer's own retry) still claims it.
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, clk.now,
    LEAST((SELECT min(c.claimable_at) FROM claimed c), (SELECT u.claimable_at FROM unpicked u),
        (SELECT d.claimable_at FROM due_unlocked d), (SELECT l.claimable_at FROM later l)
        {key_wait}),
    0, 1, NULL, (SELECT gated FROM gated)
FROM clk
