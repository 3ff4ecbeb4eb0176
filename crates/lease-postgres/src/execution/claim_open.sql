-- The key gate's walk condition (`claim_walk.sql`), spliced as the candidates' `{open}`:
-- not walked by an earlier round of the same claim (`$4`: those rows are locked by this
-- transaction, so SKIP LOCKED would return them again), and the row's key is not already
-- at its limit (the statement takes nothing, so `{taken}` is 0).
(e.id <> ALL ($4::text[]) AND NOT {key_full})
