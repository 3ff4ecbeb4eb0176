-- retry_dead(ids, input): ExecutionRecord::retry_dead on each effective record at now, all
-- checked before the first write, so a refusal changes nothing.
-- ARGV[3] wake publish command (see publish_wake), ARGV[4] 'write' | 'check' (check only:
-- a split namespace checks every partition before writing any), ARGV[5] '1' when ARGV[6]
-- is the new input, else '0', ARGV[7..] the ids (distinct, checked by the client).
-- Reply: {'unknown', i} | {'not_dead', i, status} naming the first refused id (1-based
-- among ARGV[7..]), nothing written; {'ok', now, id1, HGETALL1, ...} after the writes
-- ({'ok', now} for 'check'). Publishes now: every retried execution is due now.
local now = H.clock_now()
local records = {}
for i = 7, #ARGV do
  local r = H.load(ARGV[i])
  if r == nil then return {'unknown', H.fmt(i - 6)} end
  local e = H.effective(r, now)
  if e.st ~= 'dead' then return {'not_dead', H.fmt(i - 6), e.st} end
  records[#records + 1] = {r, e}
end
local out = {'ok', H.fmt(now)}
if ARGV[4] ~= 'write' then return out end
for _, pair in ipairs(records) do
  local r, e = pair[1], H.copy(pair[2])
  if e.es then e.st = 'suspended' else e.st = 'admitted' end
  e.du = now
  e.un = 0
  e.le = nil
  e.wk = nil
  local extra = nil
  if ARGV[5] == '1' then extra = {'in', ARGV[6]} end
  H.save(e, r, extra)
  H.place(e, r)
  out[#out + 1] = e.id
  out[#out + 1] = redis.call('HGETALL', H.k_exec(e.id))
end
H.publish_wake(ARGV[3], now)
return out
