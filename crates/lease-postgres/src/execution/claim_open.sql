-- The keyed claim's candidate condition (`claim_keyed.sql`), spliced as the candidates'
-- `{open}`: the row's key is not already at its limit in the statement's snapshot (the
-- statement has taken nothing yet, so `{taken}` is 0). A key that filled up since is
-- caught by the count after its lock (`room`); one freed since waits for the next claim.
NOT {key_full}
