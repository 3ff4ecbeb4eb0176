-- reserve_tokens(n), under the home prefix of a split namespace: takes the next
-- `n` values of the namespace's token counter for a claim in one partition (the claim then
-- gives them out with claim/claim_due.lua's ARGV[9]; a value it does not use is skipped).
-- ARGV[3] n >= 1. Reply: the base (the tokens are base + 1 ..= base + n; on a cluster they
-- carry this node's config epoch, see next_tokens in scripts/claim.lua).
-- Errors: LEASETOKEN <reason> when the counter holds no token or would pass its epoch's
-- range or 2^53 - 1 (nothing written).
local n = tonumber(ARGV[3])
local base, problem = H.next_tokens(n)
if problem then error({err = 'LEASETOKEN ' .. problem}) end
H.take_tokens(base, n)
return H.fmt(base)
