-- request_wake(id, at), unfenced: terminal -> no-op; stored status running ->
-- wake_after_claim = min(wake_after_claim, at); otherwise due_at = min(due_at, at).
-- ARGV[3] id, ARGV[4] at. Reply: {'ok'} | {'unknown'}.
local r = load(ARGV[3])
if r == nil then return {'unknown'} end
if terminal(r.st) then return {'ok'} end
local at = tonumber(ARGV[4])
if r.st == 'running' then
  local w = min_opt(r.wk, at)
  if w == r.wk then return {'ok'} end
  r.wk = w
else
  local d = min_opt(r.du, at)
  if d == r.du then return {'ok'} end
  r.du = d
end
save(r)
place(r)
return {'ok'}
