-- acknowledge(lease, outcome), fenced: ends a held delivery with an outcome.
-- ARGV[3] id, ARGV[4] token, ARGV[5] 'suspended' | 'completed' | 'failed', ARGV[6] value JSON.
-- Reply: {'ok'} | {'lost'} | {'unknown'} | {'zero'} | {'foreign'}.
local held, r = lease_on(ARGV[3], ARGV[4])
if held ~= 'held' then return {held} end
acknowledge(r, ARGV[5], ARGV[6], clock_now())
return {'ok'}
