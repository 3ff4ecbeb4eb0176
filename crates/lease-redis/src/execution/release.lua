-- release_with(lease, release), fenced: ends a held delivery unacknowledged at now.
-- ARGV[3] id, ARGV[4] token, ARGV[5] wake publish command (see publish_wake), ARGV[6]
-- 'attempt' (Release::Failed / Retry: counted, ARGV[7] kind and ARGV[8] message kept as
-- the last error; the attempt that reaches the record's limit ends it as dead, out of every
-- claimable index, in this step) or 'unstarted' (Release::NotStarted: no worker ran it, so
-- the counter and the end of the last attempt stay and it is due again at once).
-- Reply: {'ok'} | {'lost'} | {'unknown'} | {'zero'} | {'foreign'}.
-- Publishes the end of the redelivery delay (the record's new claimable instant), or now
-- for a keyed execution (a place of its key is free).
local r = H.load(ARGV[3])
if r == nil then return {'unknown'} end
local held = H.check_lease(r, ARGV[4])
if held ~= 'held' then return {held} end
local old = H.copy(r)
local now = H.clock_now()
if ARGV[6] == 'unstarted' then
  r.du = H.min_opt(r.du, r.wk)
  r.wk = nil
  r.le = nil
  if r.es then r.st = 'suspended' else r.st = 'admitted' end
  r.hend = {'not_started', now}
else
  H.end_attempt(r, now, ARGV[7], ARGV[8])
  -- The history keeps the holder's own error (Release::Failed, ARGV[9] '1'), not a retry's.
  if ARGV[9] == '1' then r.hend = {'released', now, ARGV[7], ARGV[8]} else r.hend = {'released', now} end
end
H.save(r, old)
H.place(r, old)
H.publish_wake(ARGV[5], H.min_opt((H.claimable_at(r)), H.key_freed(r, now)))
return {'ok'}
