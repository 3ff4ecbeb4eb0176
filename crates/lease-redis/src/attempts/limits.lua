-- set_attempt_limit / attempt_limits on the hash `attempts`: field a workflow name, or
-- '\31default' for the namespace default (ATTEMPTS_DEFAULT in scripts/record.lua, which
-- every claim reads to copy the limit onto the record), value the limit (1 to 10,000,
-- checked by the client).
-- ARGV[3] 'set' | 'remove' | 'list', ARGV[4] the field, ARGV[5] the limit (set).
-- Reply: set / remove {}; list {field1, limit1, ...}. Nothing is published: a limit
-- applies from each execution's next claim and makes nothing claimable.
local key = P .. 'attempts'
H.check_key_type(key, 'hash')
if ARGV[3] == 'list' then return redis.call('HGETALL', key) end
if ARGV[3] == 'set' then
  redis.call('HSET', key, ARGV[4], ARGV[5])
else
  redis.call('HDEL', key, ARGV[4])
end
return {}
