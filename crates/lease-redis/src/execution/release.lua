-- release(lease), fenced: ends a held delivery unacknowledged at now.
-- ARGV[3] id, ARGV[4] token, ARGV[5] wake publish command (see publish_wake).
-- Reply: {'ok'} | {'lost'} | {'unknown'} | {'zero'} | {'foreign'}.
-- Publishes the end of the redelivery delay (the record's new claimable instant), or now
-- for a keyed execution (a place of its key is free).
local r = load(ARGV[3])
if r == nil then return {'unknown'} end
local held = check_lease(r, ARGV[4])
if held ~= 'held' then return {held} end
local old = copy(r)
r.un = r.un + 1
r.ld = clock_now()
r.du = min_opt(r.du, r.wk)
r.wk = nil
r.le = nil
if r.es then r.st = 'suspended' else r.st = 'admitted' end
save(r, old)
place(r, old)
publish_wake(ARGV[5], min_opt((claimable_at(r)), key_freed(r, r.ld)))
return {'ok'}
