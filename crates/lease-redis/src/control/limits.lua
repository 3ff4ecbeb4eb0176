-- set_concurrency_limit / concurrency_limits (issue 21 item 4) on the hash `limits`: field
-- a concurrency key, or '\31default' for the namespace default (DEFAULT_LIMIT in
-- scripts/claim.lua, which every claim reads), value the limit (1 to 100,000, checked by
-- the client).
-- ARGV[3] 'set' | 'remove' | 'list', ARGV[4] the field, ARGV[5] the limit (set), ARGV[6]
-- wake publish command (see publish_wake).
-- Reply: set / remove {}; list {field1, limit1, ...}. A raised or removed limit publishes
-- "now" (the clock): keys it held back may be claimable.
local key = P .. 'limits'
check_key_type(key, 'hash')
if ARGV[3] == 'list' then return redis.call('HGETALL', key) end
local old = tonumber(redis.call('HGET', key, ARGV[4]) or '')
local raised = false
if ARGV[3] == 'set' then
  redis.call('HSET', key, ARGV[4], ARGV[5])
  raised = old ~= nil and tonumber(ARGV[5]) > old
else
  raised = redis.call('HDEL', key, ARGV[4]) == 1
end
if raised then publish_wake(ARGV[6], clock_now()) end
return {}
