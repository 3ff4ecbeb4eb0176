-- acknowledge(lease, outcome), fenced: ends a held delivery with an outcome.
-- ARGV[3] id, ARGV[4] token, ARGV[5] 'suspended' | 'completed' | 'failed', ARGV[6] value JSON.
-- Reply: {'ok'} | {'lost'} | {'unknown'} | {'zero'} | {'foreign'}.
local r = load(ARGV[3])
if r == nil then return {'unknown'} end
local held = check_lease(r, ARGV[4])
if held ~= 'held' then return {held} end
local kind = ARGV[5]
local old = copy(r)
local extra = nil
r.un = 0
r.ld = clock_now()
r.le = nil
local wake = r.wk
r.wk = nil
if kind == 'suspended' then
  r.st = 'suspended'
  r.es = true
  r.du = wake
else
  r.st = kind
  r.du = nil
  extra = {'oc', kind, 'ov', ARGV[6]}
end
save(r, old, extra)
place(r, old)
return {'ok'}
