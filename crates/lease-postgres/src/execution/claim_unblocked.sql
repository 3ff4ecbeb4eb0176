-- The key gate's horizon condition (`claim_gated.sql`), spliced as `claim_take.sql`'s
-- `{unblocked}`: a row due now counts unless its key is at its limit, or holds it back by
-- its ordering or rate, once this claim's leases (`picked`, so `{taken}` counts them) are
-- added. Rows due later count: the horizon is an instant to look again, never later than
-- the truth. A held key's own instant to look again is `key_wait` (`claim_keyed.sql`).
NOT (e.claimable_at <= (SELECT now FROM clk) AND ({key_full} OR {key_held}))
