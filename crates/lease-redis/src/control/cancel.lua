-- cancel(id, reason): ExecutionRecord::cancel on the effective record at
-- now, in one step that ends a live lease (every fenced write of its holder is then Lost:
-- the status is no longer running).
-- ARGV[3] id, ARGV[4] reason, ARGV[5] wake publish command (see publish_wake): ending a
-- live keyed lease publishes now (a place of its key is free).
-- Reply: {'unknown'} | {'terminal', outcome kind, outcome value} (nothing changed) |
-- {'cancelled', '1' when a live lease was ended else '0'}.
local r = H.load(ARGV[3])
if r == nil then return {'unknown'} end
-- A dead execution (no outcome) may be cancelled: an operator's other answer to it.
if H.terminal(r.st) and r.st ~= 'dead' then
  local v = redis.call('HMGET', H.k_exec(r.id), 'oc', 'ov')
  return {'terminal', v[1] or '', v[2] or ''}
end
local now = H.clock_now()
local ended = r.st == 'running' and r.le > now
local e = H.copy(H.effective(r, now))
if ended then e.hend = {'cancelled', now} end
e.st = 'cancelled'
e.le = nil
e.du = nil
e.wk = nil
e.ld = now
H.save(e, r, {'oc', 'cancelled', 'ov', ARGV[4]})
H.place(e, r)
redis.call('ZADD', K_DONE, H.fmt(now), r.id)
if ended then H.publish_wake(ARGV[5], H.key_freed(r, now)) end
return {'cancelled', ended and '1' or '0'}
