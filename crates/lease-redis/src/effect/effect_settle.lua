-- settle_effect(id, execution, result) (EffectClient.settle; EffectRecord::settle): the first
-- result is recorded and, if the owner waits, wakes it (`wake` at now) in this script; an
-- equal later result is 'already'; a different one is 'conflict', not applied.
-- ARGV[3] effect id, ARGV[4] execution id, ARGV[5] result (canonical JSON, so equality is
-- string equality), ARGV[6] wake publish command, ARGV[7] split ('1': partitions, the wake
-- is queued; see scripts/effect.lua).
-- Reply: {'unknown'} | {status, record..., now}: the record as it stood before the call
-- (effect_reply), status 'other' | 'recorded' | 'already' | 'conflict'; on a split
-- namespace followed by the queued wakes (with_queued_wakes).
local id, x, result = ARGV[3], ARGV[4], ARGV[5]
local split = ARGV[7] == '1'
local v = H.effect_fields(id)
if not v[1] then return {'unknown'} end
local now = H.clock_now()
local status
if v[1] ~= x then
  status = 'other'
elseif v[3] then
  status = v[4] == result and 'already' or 'conflict'
else
  status = 'recorded'
  local waits = v[5] == '1' and (split or H.wakeable(x))
  if waits and split then H.check_wake_queue() end
  redis.call('HSET', H.k_effect(id), 's', H.fmt(now), 'r', result)
  redis.call('HDEL', H.k_effect(id), 'w')
  if waits and split then
    H.queue_wakes({x})
  elseif waits then
    H.publish_wake(ARGV[6], H.wake_each({x}, now))
  end
end
local reply = H.effect_reply(status, v)
reply[6] = H.fmt(now)
return H.with_queued_wakes(reply, split)
