-- recount_begin(): the generation a recount of the partition's status counters
-- counts in, or '' when they are complete. A partition without counters (written before
-- them, or whose `counts` an operator deleted to force a recount) gets a new generation
-- now, the server's TIME in microseconds (above any generation its records may carry): from
-- here on every script counts the records it changes (scripts/ops.lua count_move), and the
-- recount's pages count the rest.
local K = P .. 'counts'
local v = redis.call('HMGET', K, 'g', 'ok')
if v[2] == '1' then return '' end
if v[1] then return v[1] end
local t = redis.call('TIME')
local g = H.fmt(tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('HSET', K, 'g', g, 'ok', '0')
return g
