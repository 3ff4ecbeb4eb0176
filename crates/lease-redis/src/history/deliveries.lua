-- deliveries(id): the execution's delivery history as stored (see write_history in
-- scripts/record.lua), with its record, read in one step.
-- ARGV[3] id.
-- Reply: {} when there is no such execution; else {now, record HGETALL, the ended entries
-- of `hist:<id>` oldest first, the count of dropped entries (`he`, '0' when absent), the
-- claim instant of the record's lease (`ca`, '' when absent)}.
local key = H.k_exec(ARGV[3])
local record = redis.call('HGETALL', key)
if #record == 0 then return {} end
local entries = redis.call('LRANGE', P .. 'hist:' .. ARGV[3], 0, -1)
local v = redis.call('HMGET', key, 'he', 'ca')
return {H.fmt(H.clock_now()), record, entries, v[1] or '0', v[2] or ''}
