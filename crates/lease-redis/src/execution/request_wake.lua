-- request_wake(id, at), unfenced: the transition `wake` in scripts/wake.lua.
-- ARGV[3] id, ARGV[4] at, ARGV[5] wake publish command (see publish_wake).
-- Reply: {'ok'} | {'unknown'}.
local status, publish_at = H.wake(ARGV[3], tonumber(ARGV[4]))
H.publish_wake(ARGV[5], publish_at)
return {status}
