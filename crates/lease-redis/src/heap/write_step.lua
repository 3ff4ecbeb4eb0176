-- write_step(lease, step), fenced: accepted while the token is current and its delivery has
-- not ended; an existing record is returned unchanged, otherwise the record is inserted.
-- ARGV[3] id, ARGV[4] token, ARGV[5] field (step key, \31, attempt),
-- ARGV[6] value (token|done|response).
-- Reply: {'new'} | {'existing', value} | {'lost'} | {'unknown'} | {'zero'} | {'foreign'}.
local held = H.fence(ARGV[3], ARGV[4])
if held ~= 'held' then return {held} end
local existing = H.insert_step(ARGV[3], ARGV[5], ARGV[6])
if existing == nil then return {'new'} end
return {'existing', existing}
