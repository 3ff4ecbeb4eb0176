-- wake_waiters(ids) on a split namespace: delivers, in one partition, the wakes
-- a settle or store update queued at home (scripts/effect.lua): each execution of `ids`
-- that loads is woken at now (`wake`, request_wake's transition, as the one-partition
-- scripts do inside their write); a missing one is skipped, and so is a corrupt one
-- (wakeable), exactly as there.
-- ARGV[3] wake publish command, ARGV[4..] execution ids of this partition.
-- Reply: 'ok'.
local ids = {}
for i = 4, #ARGV do
  if H.wakeable(ARGV[i]) then ids[#ids + 1] = ARGV[i] end
end
H.publish_wake(ARGV[3], H.wake_each(ids, H.clock_now()))
return 'ok'
