-- set_concurrency_limit / concurrency_limits on the hash `limits`: field
-- a concurrency key, or '\31default' for the namespace default (DEFAULT_LIMIT in
-- scripts/claim.lua, which every claim reads), value the limit (1 to 100,000, checked by
-- the client).
-- ARGV[3] 'set' | 'remove' | 'list', ARGV[4] the field, ARGV[5] the limit (set), ARGV[6]
-- wake publish command (see publish_wake).
-- Reply: set / remove {}; list {field1, limit1, ...}. A raised or removed limit, or a key's
-- own limit set in place of the default, publishes "now" (the clock): keys it held back may
-- be claimable. Every change makes the parked keys it concerns due (see parking in
-- ops.lua): the next claim judges their free places again.
local key = P .. 'limits'
H.check_key_type(key, 'hash')
if ARGV[3] == 'list' then return redis.call('HGETALL', key) end
H.check_key_type(K_PARKED, 'zset')
local default = ARGV[4] == '\31default'
local old = tonumber(redis.call('HGET', key, ARGV[4]) or '')
local raised = false
if ARGV[3] == 'set' then
  redis.call('HSET', key, ARGV[4], ARGV[5])
  raised = (old ~= nil and tonumber(ARGV[5]) > old) or (old == nil and not default)
else
  raised = redis.call('HDEL', key, ARGV[4]) == 1
end
if default then
  -- Every parked key may follow the default: one ZADD per key with parked members.
  for _, scope in ipairs(redis.call('ZRANGEBYSCORE', K_PARKED, '(' .. H.fmt(PARK_NOW), '+inf')) do
    if string.sub(scope, 1, 2) == 'k:' then redis.call('ZADD', K_PARKED, H.fmt(PARK_NOW), scope) end
  end
else
  H.park_schedule('k:' .. ARGV[4], PARK_NOW, false)
end
if raised then H.publish_wake(ARGV[6], H.clock_now()) end
return {}
