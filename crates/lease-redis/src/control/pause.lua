-- pause / resume / list_paused on one partition's set `paused` of paused
-- scopes (a workflow name, or '\31namespace' for the namespace: see NS_SCOPE in
-- scripts/claim.lua, which every claim reads).
-- ARGV[3] 'pause' | 'resume' | 'list', ARGV[4] the scope member, ARGV[5] wake publish
-- command (see publish_wake).
-- Reply: pause {1 newly paused | 0}; resume {1 was paused | 0}, and when it was, publishes
-- "now" (the clock) so idle dispatchers claim what it held back, and makes the members
-- claims parked under the workflow due (see parking in ops.lua; nothing is parked under
-- the namespace pause: a claim then examines nothing); list {members...}.
local key = P .. 'paused'
H.check_key_type(key, 'set')
if ARGV[3] == 'list' then return redis.call('SMEMBERS', key) end
if ARGV[3] == 'pause' then return {redis.call('SADD', key, ARGV[4])} end
H.check_key_type(K_PARKED, 'zset')
local was = redis.call('SREM', key, ARGV[4])
if was == 1 then
  H.park_schedule('w:' .. ARGV[4], PARK_NOW, false)
  H.publish_wake(ARGV[5], H.clock_now())
end
return {was}
