-- renew(lease, duration), fenced: extends a held lease to now + duration.
-- ARGV[3] id, ARGV[4] token, ARGV[5] duration ms.
-- Reply: {'ok', expires_at} | {'lost'} | {'unknown'} | {'zero'} | {'foreign'}.
local r = H.load(ARGV[3])
if r == nil then return {'unknown'} end
local held = H.check_lease(r, ARGV[4])
if held ~= 'held' then return {held} end
local old = H.copy(r)
r.le = H.clock_now() + tonumber(ARGV[5])
H.save(r, old)
H.place(r, old)
return {'ok', H.fmt(r.le)}
