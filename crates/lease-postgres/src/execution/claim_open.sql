-- The keyed claim's candidate condition (`claim_keyed.sql`), spliced as the candidates'
-- `{open}`: the row's key is not already at its limit, and the row is not held back by its
-- key's ordering or rate, in the statement's snapshot (the statement has taken nothing
-- yet, so `{taken}` is 0). So a held-back row never takes a place of the claim's budget.
-- A key that filled up since is caught by the count after its lock (`room`); one freed
-- since waits for the next claim.
NOT {key_full} AND NOT {key_held}
