-- get_or_create(store, initial): creates the store with `initial` unless it exists
-- (idempotent by identity). The field '' (never a store key) marks existence, so an empty
-- store still exists. ARGV[3] store id, ARGV[4..] key, value, key, value, ...
-- Reply: {'1' created | '0' found, HGETALL of the store hash}.
local key = P .. 'store:' .. ARGV[3]
local created = '0'
if redis.call('EXISTS', key) == 0 then
  redis.call('HSET', key, '', '1')
  local batch = {}
  for i = 4, #ARGV, 2 do
    batch[#batch + 1] = ARGV[i]
    batch[#batch + 1] = ARGV[i + 1]
    if #batch >= 1000 then
      redis.call('HSET', key, unpack(batch))
      batch = {}
    end
  end
  if #batch > 0 then redis.call('HSET', key, unpack(batch)) end
  created = '1'
end
return {created, redis.call('HGETALL', key)}
