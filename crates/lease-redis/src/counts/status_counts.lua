-- status_counts(): the partition's executions by effective status at the script's clock
-- (the operator command's `status` and the console), from its counters (O(1), where a
-- walk of every record took 411 ms per console page at 10^5 executions).
-- Reply: {'recount'} when the counters are not complete (a namespace from before them, or
-- one whose claim set aside a record of unknown counted status: counts.rs recounts), else
-- {now, admitted, running, suspended, completed, failed, cancelled, dead, corrupt,
-- takeovers}, the last the partition's takeover counter (`takeovers`, kept by the claims
-- that take over an expired lease: scripts/claim.lua apply_claim), read in the same step.
--
-- `counts` holds the stored statuses (scripts/ops.lua count_move). A running record whose
-- lease expired at or before now counts as its delivery ended (ExecutionRecord::effective):
-- as suspended when it was once suspended, else as admitted. Every stored-running record is
-- in `running` and, once suspended before, in `running_es`, both scored by lease expiry, so
-- the expired ones are two ZCOUNTs; one on its last attempt is in `running_last` instead of
-- `running_es`, and counts as dead once expired (a third ZCOUNT). Corrupt: the records a claim set aside (`corrupt`)
-- plus those a recount found with an unknown status (`bad`).
local now = H.clock_now()
local v = redis.call('HMGET', P .. 'counts', 'ok', 'admitted', 'running', 'suspended',
  'completed', 'failed', 'cancelled', 'bad', 'dead')
if v[1] ~= '1' then return {'recount'} end
local function n(i) return tonumber(v[i]) or 0 end
local expired = redis.call('ZCOUNT', P .. 'running', '-inf', H.fmt(now))
local expired_es = redis.call('ZCOUNT', P .. 'running_es', '-inf', H.fmt(now))
local expired_last = redis.call('ZCOUNT', P .. 'running_last', '-inf', H.fmt(now))
local corrupt_n = redis.call('ZCARD', P .. 'corrupt') + n(8)
return {H.fmt(now), H.fmt(n(2) + expired - expired_es - expired_last), H.fmt(n(3) - expired),
  H.fmt(n(4) + expired_es), H.fmt(n(5)), H.fmt(n(6)), H.fmt(n(7)), H.fmt(n(9) + expired_last),
  H.fmt(corrupt_n), H.fmt(tonumber(redis.call('GET', P .. 'takeovers')) or 0)}
