-- start with partitions, under the home prefix (the request's side; start/start_target.lua
-- is the target's). ARGV[3] 'record' | 'undo', ARGV[4] request id, ARGV[5] target id.
-- record: the target a known request id maps to, or records request id -> target (and
-- target -> request id in `start_of`, for purge_terminal).
--   Reply: {'existing', target} | {'recorded', target}.
-- undo: removes that record again if it still maps to this target (its target turned out
--   to exist already, not created by this request). Reply: {'undone'}.
local starts = P .. 'starts'
local start_of = P .. 'start_of'
if ARGV[3] == 'undo' then
  if redis.call('HGET', starts, ARGV[4]) == ARGV[5] then
    redis.call('HDEL', starts, ARGV[4])
    redis.call('HDEL', start_of, ARGV[5])
  end
  return {'undone'}
end
local known = redis.call('HGET', starts, ARGV[4])
if known then return {'existing', known} end
redis.call('HSET', starts, ARGV[4], ARGV[5])
redis.call('HSET', start_of, ARGV[5], ARGV[4])
return {'recorded', ARGV[5]}
