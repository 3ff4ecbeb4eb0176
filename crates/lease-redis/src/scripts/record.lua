-- lease-redis: execution records and their indexes, for the scripts that change them.
local K_READY = P .. 'ready'
local K_WAITING = P .. 'waiting'
local K_RUNNING = P .. 'running'
-- The members of `running` that were once suspended (ever_suspended), with the same scores:
-- status_counts tells an expired one's effective status (suspended, not admitted) by ZCOUNT.
local K_RUNNING_ES = P .. 'running_es'
local K_FAILING = P .. 'failing'
-- Terminal executions scored by the end of their last delivery (what retention purges).
local K_DONE = P .. 'done'
-- Records a claim found it cannot use (set aside, so one bad record cannot stop every
-- claim): ids by id (score 0), and their problems.
local K_CORRUPT = P .. 'corrupt'
local K_CORRUPT_WHY = P .. 'corrupt_why'
-- Attempt limits and dead letters: stored-dead executions by id (score 0), and the members
-- of `running` on their last attempt (scored by lease expiry: those expired read as dead).
local K_DEAD = P .. 'dead'
local K_RUNNING_LAST = P .. 'running_last'

-- Every script that changes records checks its other keys' types first.
H.check_key_types()

-- RedeliveryPolicy::table_ms() of the handle's policy (ARGV[2]), parsed on first use.
local TABLE = nil
function H.handle_table()
  if TABLE == nil then
    TABLE = {}
    for v in string.gmatch(ARGV[2], '%d+') do TABLE[#TABLE + 1] = tonumber(v) end
  end
  return TABLE
end

-- RedeliveryPolicy::table_ms() of a stored policy 'base_ms,factor,cap_ms' (a workflow's own,
-- kept on the record as `rp` by its claim), each entry clamped to 2^52 ms like the handle's
-- table (a longer delay is never reached either way); nil when it is not a policy
-- RedeliveryPolicy::from_parts accepts. Parsed once per script per value.
local POLICY_TABLES = {}
function H.policy_table(rp)
  local t = POLICY_TABLES[rp]
  if t then return t end
  local b, f, c = string.match(rp, '^(%d%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?),(%d%d?%d?%d?%d?%d?%d?%d?%d?%d?),(%d%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?)$')
  if not b then return nil end
  b, f, c = tonumber(b), tonumber(f), tonumber(c)
  if b == 0 or f == 0 or f > 4294967295 or c < b then return nil end
  local max = 4503599627370496
  t = {}
  local d = b
  while true do
    t[#t + 1] = math.min(d, c, max)
    if d >= c or f == 1 or #t >= 64 then break end
    d = d * f
  end
  POLICY_TABLES[rp] = t
  return t
end

-- RedeliveryPolicy::delay(n) of record `r`: table[min(n, len)] of the policy its last claim
-- kept (`rp`), else of the handle's (ExecutionRecord::redelivery_not_before).
function H.delay(r, n)
  if n <= 0 then return 0 end
  local t = r.rp and H.policy_table(r.rp) or H.handle_table()
  if n > #t then n = #t end
  return t[n]
end

function H.min_opt(a, b)
  if a == nil then return b end
  if b == nil then return a end
  if b < a then return b end
  return a
end

function H.terminal(st)
  return st == 'completed' or st == 'failed' or st == 'cancelled' or st == 'dead'
end

-- The stored record of `id` (validated), or nil when there is none. Reads only the
-- state-machine fields: payloads (input, outcome) stay in Redis, unless `payload` (a
-- claim, which checks them: the same command reads them, as `r.pl` = {workflow, input,
-- outcome kind, outcome value}, unchecked).
function H.load(id, payload)
  local key = H.k_exec(id)
  local v
  if payload then
    v = redis.call('HMGET', key, 'st', 'tk', 'un', 'es', 'du', 'le', 'wk', 'ld', 'pr', 'ck',
      'cg', 'pk', 'al', 'sq', 'wf', 'rp', 'ca', 'in', 'oc', 'ov')
  else
    v = redis.call('HMGET', key, 'st', 'tk', 'un', 'es', 'du', 'le', 'wk', 'ld', 'pr', 'ck',
      'cg', 'pk', 'al', 'sq', 'wf', 'rp', 'ca')
  end
  local st = v[1]
  if not STATUSES[st] then
    if not st and redis.call('EXISTS', key) == 0 then return nil end
    H.corrupt('execution ' .. id .. ': status')
  end
  local r = {id = id, st = st}
  if payload then r.pl = {v[15], v[18], v[19], v[20]} end
  r.tk = H.int(v[2], id, 'token')
  r.un = H.int(v[3], id, 'unacknowledged deliveries')
  if v[4] ~= '0' and v[4] ~= '1' then H.corrupt('execution ' .. id .. ': ever_suspended') end
  r.es = v[4] == '1'
  if v[5] then r.du = H.int(v[5], id, 'due_at') end
  if v[6] then r.le = H.int(v[6], id, 'lease_expires_at') end
  if v[7] then r.wk = H.int(v[7], id, 'wake_after_claim') end
  if v[8] then r.ld = H.int(v[8], id, 'last_delivery_ended_at') end
  -- Priority (absent: 0, every record written before priorities) and concurrency key.
  r.pr = 0
  if v[9] then r.pr = H.int(v[9], id, 'priority') end
  if r.pr < -1000 or r.pr > 1000 then H.corrupt('execution ' .. id .. ': priority') end
  if v[10] then r.ck = v[10] end
  -- The counting generation (see count_move in ops.lua).
  r.cg = v[11]
  -- Its parked entry, when a claim parked it (see parking in ops.lua).
  r.pk = v[12]
  -- The attempt limit the last claim copied onto the record (absent: unlimited).
  if v[13] then r.al = H.int(v[13], id, 'attempt limit') end
  -- The admission sequence (absent on a record admitted before it existed) and workflow,
  -- which place the record in its key's line and the browse sets.
  if v[14] then r.sq = H.int(v[14], id, 'admission sequence') end
  r.wf = v[15]
  -- When the last claim issued the lease (absent: claimed before the delivery history).
  if v[17] then r.ca = H.int(v[17], id, 'claimed_at') end
  -- The workflow's own redelivery policy the last claim kept (absent: the handle's).
  if v[16] then
    if not H.policy_table(v[16]) then H.corrupt('execution ' .. id .. ': redelivery policy') end
    r.rp = v[16]
  end
  if st == 'running' and r.le == nil then
    H.corrupt('execution ' .. id .. ': running without a lease expiry')
  end
  -- What the client decodes as u64 / u32, and what Lua holds exactly.
  if r.tk < 0 or r.tk > 9007199254740991 then H.corrupt('execution ' .. id .. ': token') end
  if r.un < 0 or r.un > 4294967295 then
    H.corrupt('execution ' .. id .. ': unacknowledged deliveries')
  end
  return r
end

function H.copy(r)
  local c = {}
  for k, v in pairs(r) do c[k] = v end
  return c
end

local NUMBERS = {'tk', 'un', 'du', 'le', 'wk', 'ld', 'al', 'ca'}

-- Delivery history (lease-core's history): the latest delivery is the record itself (a
-- running record's `tk` and `ca`, when its claim issued the lease; a completed or failed
-- record's `tk`, `ca` and `ld`, acknowledged, when its last entry in the list has an older
-- token); the list `hist:<id>` holds the other ended ones, oldest first, at most
-- HISTORY_MAX, each
-- 'token\31claimed_at\31end\31ended_at' (end: DeliveryEnd::as_str) and, for an attempt,
-- '\31<bytes of kind>\31<kind><message>'; the record's field `he` counts those dropped.
-- Written by save() in the script of each transition: `r.hend` ({end, at, kind, message},
-- set by the transition that ends the delivery) appends the ended entry. A claim writes
-- nothing more than `ca`, in the record's HSET, and a terminal acknowledgement appends
-- nothing, so the plain drain (claim, complete) writes no list at all.
local HISTORY_MAX = 20
function H.k_hist(id) return P .. 'hist:' .. id end

function H.write_history(r, old)
  local h = r.hend
  if not h or old.st ~= 'running' or not old.ca then return end
  local entry = H.fmt(old.tk) .. '\31' .. H.fmt(old.ca) .. '\31' .. h[1] .. '\31' .. H.fmt(h[2])
  if h[3] then entry = entry .. '\31' .. #h[3] .. '\31' .. h[3] .. h[4] end
  local n = redis.call('RPUSH', H.k_hist(r.id), entry)
  if n > HISTORY_MAX then
    redis.call('LTRIM', H.k_hist(r.id), n - HISTORY_MAX, -1)
    redis.call('HINCRBY', H.k_exec(r.id), 'he', n - HISTORY_MAX)
  end
end

-- Writes the state-machine fields of `r` that differ from `old` (the stored record it was
-- derived from), plus `extra` field/value pairs, in one HSET and at most one HDEL.
function H.save(r, old, extra)
  local set = extra or {}
  local del = {}
  if r.st ~= old.st then
    set[#set + 1] = 'st'
    set[#set + 1] = r.st
    local g = H.count_move(old.cg, old.st, r.st)
    if g then
      set[#set + 1] = 'cg'
      set[#set + 1] = g
      r.cg = g
    end
    H.browse_move(r.sq, r.id, r.wf, r.ck, old.st, r.st)
  end
  if r.err and r.err ~= old.err then
    -- The last error: kind, message, the attempt it ended and when.
    for i, f in ipairs({'ek', 'em', 'ea', 'et'}) do
      set[#set + 1] = f
      set[#set + 1] = r.err[i]
    end
  end
  if r.es ~= old.es then
    set[#set + 1] = 'es'
    set[#set + 1] = r.es and '1' or '0'
  end
  if r.rp ~= old.rp then
    if r.rp then
      set[#set + 1] = 'rp'
      set[#set + 1] = r.rp
    else
      del[#del + 1] = 'rp'
    end
  end
  for _, f in ipairs(NUMBERS) do
    local v = r[f]
    if v ~= old[f] then
      if v == nil then
        del[#del + 1] = f
      else
        set[#set + 1] = f
        set[#set + 1] = H.fmt(v)
      end
    end
  end
  if #set > 0 then redis.call('HSET', H.k_exec(r.id), unpack(set)) end
  if #del > 0 then redis.call('HDEL', H.k_exec(r.id), unpack(del)) end
  H.write_history(r, old)
end

-- ExecutionRecord::claimable_at of the stored record `r`: the instant from which it is
-- claimable if nothing else happens (for a running delivery: once its lease expired and the
-- delay then owed passed; otherwise its due time, or the end of its redelivery delay if
-- later), and the due time it is ordered by. nil, nil when terminal or not due.
function H.claimable_at(r)
  if r.st == 'running' then
    -- A last attempt never becomes claimable: its expiry ends the execution as dead.
    if H.last_attempt(r) then return nil, nil end
    local due = H.min_opt(r.du, r.wk)
    if due == nil then return nil, nil end
    return math.max(due, r.le + H.delay(r, r.un + 1)), due
  end
  if H.terminal(r.st) or r.du == nil then return nil, nil end
  local at = r.du
  if r.un > 0 and r.ld ~= nil then at = math.max(at, r.ld + H.delay(r, r.un)) end
  return at, r.du
end

-- Where a stored state belongs:
--   run:  running executions, scored by lease expiry (list_failing finds expired ones);
--   fail: executions with unacknowledged deliveries, scored -count (most failing first,
--         then id, since equal scores sort by member);
--   due:  its level's ready set (ready_key) when claimable from its due time
--         (claimable_at = due), scored by due_at, so claim order within a level is
--         (due_at, id); 'waiting' when claimable_at lies after due_at, scored by
--         claimable_at (claim_due moves it to its ready set once passed);
--   live: (keyed running executions) the lease expiry, in live:<key>;
--   last: (running executions on their last attempt) the lease expiry, in running_last;
--         es: (other running executions once suspended) the same, in running_es: so
--         status_counts tells an expired member's effective status by ZCOUNT;
--   dead: stored-dead executions, in `dead` (by id, list_dead).
-- Either way a member's score is never later than its claimable_at, which is what makes the
-- claim's horizon (the first score of each set) a safe lower bound.
function H.slots(r)
  local s = {}
  if r.st == 'running' then
    s.run = r.le
    if H.last_attempt(r) then s.last = r.le elseif r.es then s.es = r.le end
  end
  if r.st == 'dead' then s.dead = 0 end
  if r.un > 0 then s.fail = -r.un end
  local at, due = H.claimable_at(r)
  if at ~= nil then
    if at <= due then
      s.due = H.ready_key(r.pr)
      s.score = due
    else
      s.due = K_WAITING
      s.score = at
    end
  end
  return s
end

-- Takes stored record `r` out of the parked set it is in, if any: a record that changes
-- is put where its new state calls for (a claim parks it again if still held back).
function H.unpark_record(r)
  if not r.pk then return end
  H.unpark_entry(r.pk)
  redis.call('HDEL', H.k_exec(r.id), 'pk')
end

-- True when record `r` stands in its key's line (see ops.lua): keyed, admitted with a
-- sequence, neither terminal nor dead.
function H.in_line(r)
  return r.ck ~= nil and r.sq ~= nil and not H.terminal(r.st)
end

-- Tells the claims when a place of keyed `r`'s key may free, given its slots before (`o`)
-- and after (`n`) and its record before (`old`): a new or renewed lease at its expiry; a
-- lease that ended, a member that left the ready sets unclaimed (one a claim brought back
-- for a free place) or the key's line (the next of an ordered key may go), at once.
function H.key_may_open(r, n, o, old)
  if not r.ck then return end
  local at = nil
  if n.run and n.run ~= o.run then at = n.run
  elseif o.run and not n.run then at = PARK_NOW
  elseif o.due and not n.due and not n.run then at = PARK_NOW
  elseif H.in_line(old) and not H.in_line(r) then at = PARK_NOW end
  if at then H.park_schedule('k:' .. r.ck, at, false) end
end

-- Keeps `r` in its key's line while in_line, given whether it `was` there.
function H.place_line(r, was)
  local is = H.in_line(r)
  if is == was or not r.ck or not r.sq then return end
  if is then redis.call('ZADD', H.line_key(r.ck), H.fmt(r.sq), r.id)
  else redis.call('ZREM', H.line_key(r.ck), r.id) end
end

-- Sets `id`'s score in `key` to `new` (nil: out) when it differs from `was`.
function H.place_member(key, new, was, id)
  if new == was then return end
  H.zset_put(key, id, new and H.fmt(new))
end

-- Moves `r` from the indexes its previous stored state `old` called for to those its state
-- calls for, skipping commands that change nothing. A member of 'waiting' may already have
-- been moved to its ready set by claim_due, so it is removed from both; a parked record
-- leaves its parked set.
function H.place(r, old)
  local n, o = H.slots(r), H.slots(old)
  local id = r.id
  H.unpark_record(old)
  H.key_may_open(r, n, o, old)
  H.place_line(r, H.in_line(old))
  if n.run ~= o.run then
    H.zset_put(K_RUNNING, id, n.run and H.fmt(n.run))
    if r.ck and n.run then redis.call('ZADD', H.live_key(r.ck), H.fmt(n.run), id)
    elseif r.ck then redis.call('ZREM', H.live_key(r.ck), id) end
  end
  H.place_member(K_RUNNING_ES, n.es, o.es, id)
  H.place_member(K_RUNNING_LAST, n.last, o.last, id)
  H.place_member(K_DEAD, n.dead, o.dead, id)
  H.place_member(K_FAILING, n.fail, o.fail, id)
  if n.due == o.due and n.score == o.score and o.due ~= K_WAITING then return end
  if n.due == K_WAITING then
    H.zset_put(K_WAITING, id, H.fmt(n.score))
    if o.due then H.ready_rem(r.pr, id) end
  elseif n.due then
    H.ready_add(r.pr, H.fmt(n.score), id)
    if o.due == K_WAITING then H.zset_put(K_WAITING, id, nil) end
  else
    if o.due then H.ready_rem(r.pr, id) end
    if o.due == K_WAITING then H.zset_put(K_WAITING, id, nil) end
  end
end

-- Puts `r` where its state calls for, whatever the indexes hold now (repairs an entry
-- that time moving backwards left in a ready set).
function H.reindex(r)
  local n = H.slots(r)
  local id = r.id
  H.unpark_record(r)
  if r.ck then H.park_schedule('k:' .. r.ck, n.run or PARK_NOW, false) end
  H.place_line(r, not H.in_line(r))
  if n.run then redis.call('ZADD', K_RUNNING, H.fmt(n.run), id) else redis.call('ZREM', K_RUNNING, id) end
  if r.ck and n.run then redis.call('ZADD', H.live_key(r.ck), H.fmt(n.run), id)
  elseif r.ck then redis.call('ZREM', H.live_key(r.ck), id) end
  H.place_member(K_RUNNING_ES, n.es, true, id)
  H.place_member(K_RUNNING_LAST, n.last, true, id)
  H.place_member(K_DEAD, n.dead, true, id)
  if n.fail then redis.call('ZADD', K_FAILING, H.fmt(n.fail), id) else redis.call('ZREM', K_FAILING, id) end
  if n.due == K_WAITING then
    redis.call('ZADD', K_WAITING, H.fmt(n.score), id)
    H.ready_rem(r.pr, id)
  elseif n.due then
    H.ready_add(r.pr, H.fmt(n.score), id)
    redis.call('ZREM', K_WAITING, id)
  else
    H.ready_rem(r.pr, id)
    redis.call('ZREM', K_WAITING, id)
  end
end

-- The instant a delivery of `r` ending at `now` frees a place of its concurrency key (the
-- wake-up path hears "now": a claimer held back by the key's limit may go on), or nil
-- for an unkeyed execution.
function H.key_freed(r, now)
  if r.ck then return now end
  return nil
end

-- ExecutionRecord::end_unacknowledged on the running record `r` (changed in place) at `at`:
-- an attempt, noted as the last error (`kind`, `message`), that leaves the execution
-- waiting, or dead when it used the last attempt.
function H.end_attempt(r, at, kind, message)
  r.un = r.un + 1
  r.ld = at
  r.du = H.min_opt(r.du, r.wk)
  r.wk = nil
  r.le = nil
  r.err = {kind, message, H.fmt(r.un), H.fmt(at)}
  if r.al ~= nil and r.un >= r.al then
    r.st = 'dead'
    r.du = nil
  elseif r.es then r.st = 'suspended' else r.st = 'admitted' end
end

-- LastError::expiry_note: the kind and message of an attempt whose lease expired.
local EXPIRED_KIND = 'lease_expired'
local EXPIRED_MESSAGE = 'the lease expired before the delivery was acknowledged'

-- ExecutionRecord::effective: a running delivery whose lease expired at or before `now`
-- reads as ended without acknowledgement at its expiry (dead when it was the last attempt).
function H.effective(r, now)
  if r.st ~= 'running' or r.le > now then return r end
  local e = H.copy(r)
  H.end_attempt(e, r.le, EXPIRED_KIND, EXPIRED_MESSAGE)
  e.hend = {'expired', r.le, EXPIRED_KIND, EXPIRED_MESSAGE}
  return e
end

-- The attempt limit (a number, nil: unlimited) a claim copies onto the record of an
-- execution of workflow `wf` (nil: none): the workflow's in the hash `attempts`, else the
-- namespace default (field ATTEMPTS_DEFAULT, a control character first: no workflow name
-- holds one). Read once per script per workflow (false caches "none").
local ATTEMPTS_DEFAULT = '\31default'
local ATTEMPTS_OF = {}
function H.attempt_limit_for(wf)
  local name = wf or ATTEMPTS_DEFAULT
  local n = ATTEMPTS_OF[name]
  if n == nil then
    local v = redis.call('HMGET', P .. 'attempts', name, ATTEMPTS_DEFAULT)
    local raw = v[1] or v[2]
    n = false
    if raw then
      n = tonumber(raw)
      if not n then H.corrupt('attempt limit of ' .. (wf or 'the namespace')) end
    end
    ATTEMPTS_OF[name] = n
  end
  return n or nil
end

-- The redelivery policy (the stored text, nil: the handle's) a claim keeps on the record of
-- an execution of workflow `wf`: the workflow's own in the hash `redelivery`, read once per
-- script per workflow (false caches "none").
local REDELIVERY_OF = {}
function H.redelivery_for(wf)
  if not wf then return nil end
  local v = REDELIVERY_OF[wf]
  if v == nil then
    v = redis.call('HGET', P .. 'redelivery', wf)
    if v and not H.policy_table(v) then H.corrupt('redelivery policy of ' .. wf) end
    REDELIVERY_OF[wf] = v
  end
  return v or nil
end

-- Stores as dead the running executions whose last attempt expired at or before `now` (at
-- most `budget`), as every read already sees them: keeps `running` to live work.
function H.bury_expired(now, budget)
  local ids = redis.call('ZRANGEBYSCORE', K_RUNNING_LAST, '-inf', H.fmt(now), 'LIMIT', 0, budget)
  for _, id in ipairs(ids) do
    local ok, r = pcall(H.load, id)
    if ok and r ~= nil and r.st == 'running' then
      local e = H.effective(r, now)
      H.save(e, r)
      H.place(e, r)
    elseif ok then
      redis.call('ZREM', K_RUNNING_LAST, id)
    end
  end
end

-- ExecutionRecord::claimable on an effective record.
function H.claimable(e, now)
  if H.terminal(e.st) or e.st == 'running' then return false end
  if e.du == nil or e.du > now then return false end
  if e.un > 0 and e.ld ~= nil and now < e.ld + H.delay(e, e.un) then return false end
  return true
end
