-- deliveries(id): the execution's delivery history as stored (see write_history in
-- scripts/record.lua), with its record, read in one step.
-- ARGV[3] id.
-- Reply: {} when there is no such execution; else {now, record HGETALL, the entries of
-- `hist:<id>` oldest first, the count of dropped entries (`he`, '0' when absent)}.
local key = k_exec(ARGV[3])
local record = redis.call('HGETALL', key)
if #record == 0 then return {} end
local entries = redis.call('LRANGE', P .. 'hist:' .. ARGV[3], 0, -1)
return {fmt(clock_now()), record, entries, redis.call('HGET', key, 'he') or '0'}
