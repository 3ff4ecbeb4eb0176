-- request_wake(id, at), unfenced: terminal -> no-op; stored status running ->
-- wake_after_claim = min(wake_after_claim, at); otherwise due_at = min(due_at, at).
-- ARGV[3] id, ARGV[4] at, ARGV[5] wake publish command (see publish_wake).
-- Reply: {'ok'} | {'unknown'}.
-- Publishes the record's new claimable instant when the wake changed it and no live lease
-- holds the execution (a live holder folds it into its acknowledgement, which publishes).
local r = load(ARGV[3])
if r == nil then return {'unknown'} end
if terminal(r.st) then return {'ok'} end
local at = tonumber(ARGV[4])
local old = copy(r)
if r.st == 'running' then
  r.wk = min_opt(r.wk, at)
  if r.wk == old.wk then return {'ok'} end
else
  r.du = min_opt(r.du, at)
  if r.du == old.du then return {'ok'} end
end
save(r, old)
place(r, old)
if r.st ~= 'running' or r.le <= clock_now() then publish_wake(ARGV[5], (claimable_at(r))) end
return {'ok'}
