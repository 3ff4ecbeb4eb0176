-- set_rate_limit / rate_limits / set_key_ordering / key_ordering (lease_core::keyed) on the
-- hashes `rates` (field a concurrency key, or '\31default' for the namespace default; value
-- '<starts>:<period ms>', checked by the client) and `ordered` (field a key or the default;
-- value '1'), which every claim reads (see scripts/claim.lua).
-- ARGV[3] 'rates' | 'ordered', ARGV[4] 'set' | 'remove' | 'list', ARGV[5] the field,
-- ARGV[6] the value (set), ARGV[7] wake publish command (see publish_wake).
-- Reply: set / remove {}; list {field1, value1, ...}. A changed rate or an unmarked key
-- makes the parked keys it concerns due (see parking in ops.lua) and publishes "now" (the
-- clock): what it held back may be claimable. Marking a key ordered publishes nothing.
local key = P .. ARGV[3]
H.check_key_type(key, 'hash')
if ARGV[4] == 'list' then return redis.call('HGETALL', key) end
H.check_key_type(K_PARKED, 'zset')
local changed
if ARGV[4] == 'set' then
  changed = redis.call('HGET', key, ARGV[5]) ~= ARGV[6]
  redis.call('HSET', key, ARGV[5], ARGV[6])
else
  changed = redis.call('HDEL', key, ARGV[5]) == 1
end
-- A key no rate applies to any more forgets its claim instants, so a rate set later counts
-- from then.
if changed and ARGV[3] == 'rates' and ARGV[4] == 'remove' then
  local rated = P .. 'rated'
  H.check_key_type(rated, 'set')
  local forgotten = {}
  if ARGV[5] == '\31default' then
    forgotten = redis.call('SMEMBERS', rated)
  elseif redis.call('HEXISTS', key, '\31default') == 0 then
    forgotten = {ARGV[5]}
  end
  for _, ck in ipairs(forgotten) do
    if redis.call('HEXISTS', key, ck) == 0 then
      redis.call('DEL', P .. 'starts:' .. ck)
      redis.call('SREM', rated, ck)
    end
  end
end
local opens = changed and (ARGV[3] == 'rates' or ARGV[4] == 'remove')
if not opens then return {} end
if ARGV[5] == '\31default' then
  for _, scope in ipairs(redis.call('ZRANGEBYSCORE', K_PARKED, '(' .. H.fmt(PARK_NOW), '+inf')) do
    if string.sub(scope, 1, 2) == 'k:' then redis.call('ZADD', K_PARKED, H.fmt(PARK_NOW), scope) end
  end
else
  H.park_schedule('k:' .. ARGV[5], PARK_NOW, false)
end
H.publish_wake(ARGV[7], H.clock_now())
return {}
