-- acknowledge_and_claim(ack, next): acknowledge (fenced, exactly as acknowledge.lua), then
-- claim_due_with_horizon evaluated after it (exactly as claim_due.lua with records and the
-- horizon), in one script: one round trip per delivery instead of two.
-- ARGV[3] id, ARGV[4] token, ARGV[5] 'suspended' | 'completed' | 'failed', ARGV[6] value
-- JSON, ARGV[7] wake publish command (see publish_wake), ARGV[8] the claim's caller now
-- ('' = the clock's), ARGV[9] claim limit, ARGV[10] lease ms.
-- Reply: {'unknown'} | {'zero'} | {'foreign'} (bad input: nothing written, no claim);
-- {'ok' | 'lost', claim reply} with the claim reply exactly as claim_due's with records and
-- horizon; {'ok', 'LEASETOKEN', reason} when the acknowledgement was applied and the token
-- counter refused the claim (the claim wrote nothing). When the acknowledgement was lost
-- and the counter refuses, the error is LEASETOKEN as in claim_due: nothing was written.
-- Publishes one message: the earliest of the acknowledged record's claimable instant (unless
-- the claim took it), the freed key place's (a keyed execution) and the new leases' (what
-- acknowledge and claim_due publish).
local held, r = H.lease_on(ARGV[3], ARGV[4])
if held ~= 'held' and held ~= 'lost' then return {held} end
local clock = H.clock_now()
local ack_at, freed = nil, nil
local acked = 'lost'
if held == 'held' then
  ack_at, freed = H.acknowledge(r, ARGV[5], ARGV[6], clock)
  acked = 'ok'
end
local now = H.claim_now(clock, ARGV[8])
local out, earliest, problem = H.claim(now, tonumber(ARGV[9]), tonumber(ARGV[10]), true, true)
if problem then
  if held ~= 'held' then error({err = 'LEASETOKEN ' .. problem}) end
  H.publish_wake(ARGV[7], H.min_opt(ack_at, freed))
  return {acked, 'LEASETOKEN', problem}
end
-- A claim of the acknowledged execution itself supersedes the acknowledgement's instant.
if ack_at ~= nil and redis.call('HGET', H.k_exec(r.id), 'st') == 'running' then ack_at = nil end
H.publish_wake(ARGV[7], H.min_opt(H.min_opt(ack_at, freed), earliest))
return {acked, out}
