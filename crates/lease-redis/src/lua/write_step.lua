-- write_step(lease, step), fenced: accepted while the token is current and its delivery has
-- not ended; an existing record is returned unchanged, otherwise the record is inserted.
-- ARGV[3] id, ARGV[4] token, ARGV[5] field (step key, \31, attempt),
-- ARGV[6] value (token|done|response).
-- Reply: {'new'} | {'existing', value} | {'lost'} | {'unknown'} | {'zero'} | {'foreign'}.
local h = redis.call('HMGET', k_exec(ARGV[3]), 'st', 'tk')
if not h[1] then return {'unknown'} end
if not STATUSES[h[1]] then corrupt('execution ' .. ARGV[3] .. ': status') end
local r = {st = h[1], tk = int(h[2], ARGV[3], 'token')}
local held = check_lease(r, ARGV[4])
if held ~= 'held' then return {held} end
local key = P .. 'steps:' .. ARGV[3]
if redis.call('HSETNX', key, ARGV[5], ARGV[6]) == 1 then return {'new'} end
return {'existing', redis.call('HGET', key, ARGV[5])}
