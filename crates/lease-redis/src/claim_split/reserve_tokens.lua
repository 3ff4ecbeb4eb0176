-- reserve_tokens(n), under the home prefix of a split namespace (issue 14): takes the next
-- `n` values of the namespace's token counter for a claim in one partition (the claim then
-- gives them out with claim/claim_due.lua's ARGV[9]; a value it does not use is skipped).
-- ARGV[3] n >= 1. Reply: the counter before (the tokens are base + 1 ..= base + n).
-- Errors: LEASETOKEN <reason> when the counter holds no token or would pass 2^53 - 1
-- (nothing written).
local n = tonumber(ARGV[3])
local base, problem = read_counter()
problem = problem or range_problem(base, n)
if problem then error({err = 'LEASETOKEN ' .. problem}) end
redis.call('INCRBY', P .. 'token', n)
return fmt(base)
