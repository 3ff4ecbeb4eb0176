-- claim_due(now, limit, duration): claims up to `limit` claimable executions in
-- (due_at, id) order, each with the next value of the namespace's token counter (see
-- scripts/claim.lua).
-- ARGV[3] the caller's now ('' = the clock's), ARGV[4] limit, ARGV[5] lease ms,
-- ARGV[6] (optional) '1' to return each claimed record, ARGV[7] (optional) wake publish
-- command (see publish_wake), ARGV[8] (optional) '1' to return the horizon, ARGV[9]
-- (optional, a partition of a split namespace) 'peek' to claim nothing and reply
-- as peek_claim in scripts/claim.lua, or the tokens reserved for this claim, comma separated
-- and ascending (limit = their number), used instead of the counter.
-- Reply: {id1, token1, expires_at1, id2, ...}; with records
-- {id1, token1, expires_at1, HGETALL1, id2, ...}, each HGETALL taken right after the claim
-- (what get reads then); with the horizon, the same preceded by {now, next}, `next` the
-- earliest claimable instant left in the namespace ('' = none). When the claim moved
-- corrupt records out of the indexes, one last element {'corrupt', id1, problem1, ...}.
-- Errors: LEASETOKEN <reason> when the token counter cannot issue tokens above every
-- candidate's stored token within 2^53 - 1 (nothing written).
-- Publishes the earliest claimable instant of the new leases (lease expiry plus the delay a
-- lapse would then owe), so idle dispatchers elsewhere arm a timer for it.
local now = H.claim_now(H.clock_now(), ARGV[3])
if ARGV[9] == 'peek' then return H.peek_claim(now, tonumber(ARGV[4])) end
local tokens = nil
if ARGV[9] and ARGV[9] ~= '' then
  tokens = {}
  for t in string.gmatch(ARGV[9], '%d+') do tokens[#tokens + 1] = tonumber(t) end
end
local out, earliest, problem = H.claim(now, tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == '1', ARGV[8] == '1', tokens)
if problem then error({err = 'LEASETOKEN ' .. problem}) end
H.publish_wake(ARGV[7], earliest)
return out
