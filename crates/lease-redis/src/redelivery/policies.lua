-- set_redelivery_policy / redelivery_policies on the hash `redelivery`: field a workflow
-- name, value 'base_ms,factor,cap_ms' (RedeliveryPolicy::from_parts; every claim copies its
-- workflow's value onto the record it claims as field `rp`, redelivery_for in
-- scripts/record.lua, and the delay after that delivery follows it).
-- ARGV[3] 'set' | 'remove' | 'list', ARGV[4] the workflow, ARGV[5] the value (set), ARGV[6]
-- wake publish command (see publish_wake).
-- Reply: set / remove {}; list {field1, value1, ...}. Removing a policy, or setting one that
-- shortens the delay for some count, publishes "now"
-- (the clock), so idle dispatchers claim again under it.
local key = P .. 'redelivery'
H.check_key_type(key, 'hash')
if ARGV[3] == 'list' then return redis.call('HGETALL', key) end
local old = redis.call('HGET', key, ARGV[4])
local before = {rp = old or nil}
local after = {}
if ARGV[3] == 'set' then
  if not H.policy_table(ARGV[5]) then error('redelivery policy ' .. ARGV[5]) end
  after.rp = ARGV[5]
  redis.call('HSET', key, ARGV[4], ARGV[5])
else
  redis.call('HDEL', key, ARGV[4])
end
-- Both tables end at their cap: one count past the longer covers every later count.
if ARGV[3] == 'remove' and before.rp then
  H.publish_wake(ARGV[6], H.clock_now())
  return {}
end
local n = math.max(#(before.rp and H.policy_table(before.rp) or H.handle_table()),
  #(after.rp and H.policy_table(after.rp) or H.handle_table())) + 1
for i = 1, n do
  if H.delay(after, i) < H.delay(before, i) then
    H.publish_wake(ARGV[6], H.clock_now())
    break
  end
end
return {}
