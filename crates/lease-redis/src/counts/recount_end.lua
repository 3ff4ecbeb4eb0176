-- recount_end(g): after a recount's SCAN passed every key, marks the counters
-- complete, unless the generation moved on meanwhile (ARGV[3] the recount's generation).
-- Reply: 1 when complete, 0 when another recount is needed.
local K = P .. 'counts'
if redis.call('HGET', K, 'g') ~= ARGV[3] then return 0 end
redis.call('HSET', K, 'ok', '1')
return 1
