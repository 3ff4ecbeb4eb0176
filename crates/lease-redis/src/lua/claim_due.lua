-- claim_due(now, limit, duration): claims up to `limit` claimable executions in
-- (due_at, id) order, each with the next value of the namespace's token counter.
-- ARGV[3] the caller's now ('' = the clock's), ARGV[4] limit, ARGV[5] lease ms,
-- ARGV[6] (optional) '1' to return each claimed record, ARGV[7] (optional) wake publish
-- command (see publish_wake), ARGV[8] (optional) '1' to return the horizon.
-- Reply: {id1, token1, expires_at1, id2, ...}; with records
-- {id1, token1, expires_at1, HGETALL1, id2, ...}, each HGETALL taken right after the claim
-- (what get reads then); with the horizon, the same preceded by {now, next}, `next` the
-- earliest claimable instant left in the namespace ('' = none). When the claim moved
-- corrupt records out of the indexes, one last element {'corrupt', id1, problem1, ...}.
-- Errors: LEASETOKEN <reason> when the token counter cannot issue tokens above every
-- candidate's stored token within 2^53 - 1 (nothing written).
-- Publishes the earliest claimable instant of the new leases (lease expiry plus the delay a
-- lapse would then owe), so idle dispatchers elsewhere arm a timer for it.
--
-- The script plans first, reading only, then checks the token counter, then writes: a Lua
-- error does not roll back, so every refusal happens before the first write.
local now = clock_now()
if ARGV[3] ~= '' then
  local requested = tonumber(ARGV[3])
  if requested < now then now = requested end
end
local limit = tonumber(ARGV[4])
local lease_ms = tonumber(ARGV[5])
local with_records = ARGV[6] == '1'
local with_horizon = ARGV[8] == '1'
-- Bounded work per call (issue 11): at most BUDGET waiting->ready moves, and at most
-- limit + BUDGET ready members examined. What is left is handled by the next call; the
-- horizon then reports "now" (a member at or before now remains in ready or waiting).
local BUDGET = math.max(limit * 4, 100)
local MAX_TOKEN = 9007199254740991 -- 2^53 - 1: doubles are exact up to here

-- ---- validation of what the client decodes (issue 11: a claim that issued a lease must
-- never fail afterwards, so the script refuses, as corrupt, a candidate the client could not
-- decode) ----

-- True when `s` is UTF-8 (no overlong forms, surrogates or code points past U+10FFFF);
-- with `names`, also 1-255 bytes with no control character (char::is_control: U+0000-001F,
-- U+007F-009F), the rule of every id and workflow name.
local function utf8_ok(s, names)
  local n = #s
  if names and (n == 0 or n > 255) then return false end
  if not string.find(s, '[%z\1-\31\127-\255]') then return true end
  local i = 1
  while i <= n do
    local c = string.byte(s, i)
    local len, cp
    if c < 0x80 then len, cp = 1, c
    elseif c >= 0xc2 and c < 0xe0 then len, cp = 2, c - 0xc0
    elseif c >= 0xe0 and c < 0xf0 then len, cp = 3, c - 0xe0
    elseif c >= 0xf0 and c < 0xf5 then len, cp = 4, c - 0xf0
    else return false end
    if i + len - 1 > n then return false end
    for j = i + 1, i + len - 1 do
      local b = string.byte(s, j)
      if b < 0x80 or b > 0xbf then return false end
      cp = cp * 64 + (b - 0x80)
    end
    if (len == 3 and cp < 0x800) or (len == 4 and (cp < 0x10000 or cp > 0x10ffff))
      or (cp >= 0xd800 and cp <= 0xdfff) then
      return false
    end
    if names and (cp < 0x20 or (cp >= 0x7f and cp <= 0x9f)) then return false end
    i = i + len
  end
  return true
end

local function valid_name(s) return utf8_ok(s, true) end

-- The problem a failed pcall(load, ...) reports, as text without the script position.
local function problem_of(e)
  local msg = e
  if type(e) == 'table' then msg = e.err or e.message or 'unreadable record' end
  msg = tostring(msg)
  local at = string.find(msg, 'LEASECORRUPT ', 1, true)
  if at then return string.sub(msg, at + 13) end
  return msg
end

-- What the client would fail to decode in the payload fields of execution `id` (workflow
-- name, input, outcome), or nil. load() has checked the state-machine fields.
local function payload_problem(id)
  local v = redis.call('HMGET', k_exec(id), 'wf', 'in', 'oc', 'ov')
  if v[1] and not valid_name(v[1]) then
    return 'workflow name is not 1-255 bytes of UTF-8 without control characters'
  end
  if v[2] and not utf8_ok(v[2], false) then return 'input is not UTF-8' end
  if v[3] or v[4] then
    if (v[3] ~= 'completed' and v[3] ~= 'failed') or not v[4] then return 'outcome' end
    if not utf8_ok(v[4], false) then return 'outcome is not UTF-8' end
  end
  return nil
end

-- ---- plan (reads only) ----
local seen = {}
local corrupt = {} -- {id, problem}, moved out of every index
local moves = {}   -- {id, due or nil}: waiting -> ready (or just out of waiting)
local stale = {}   -- ready members without a record
local replace = {} -- records whose index entries are wrong (reindex)
local cands = {}   -- {id, r (stored), e (effective)} to claim, in claim order

-- A candidate's record, or nil and the problem when it cannot be used.
local function inspect(id)
  local ok, r = pcall(load, id)
  if not ok then return nil, problem_of(r) end
  if not valid_name(id) then
    return nil, 'execution id is not 1-255 bytes of UTF-8 without control characters'
  end
  return r, nil
end

local function quarantine(id, problem)
  corrupt[#corrupt + 1] = {id, problem}
end

-- Waiting members whose claimable instant passed, oldest first; each moves to ready,
-- scored by its due time.
local moved = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_WAITING, '-inf', fmt(now), 'LIMIT', 0, BUDGET)) do
  seen[id] = true
  local r, problem = inspect(id)
  if problem then
    quarantine(id, problem)
  else
    local due = nil
    if r ~= nil then
      local _, d = claimable_at(r)
      due = d
    end
    moves[#moves + 1] = {id, due}
    if due ~= nil and due <= now then moved[#moved + 1] = {id = id, due = due, r = r} end
  end
end
table.sort(moved, function(a, b)
  if a.due ~= b.due then return a.due < b.due end
  return a.id < b.id
end)

-- Candidates in (due_at, id) order from ready (members at or before now, read in pages)
-- merged with the moved ones.
local examined = 0
local offset = 0
local page = {}
local pi = 1
local mi = 1
local ready_done = false
local function next_ready()
  while true do
    if pi > #page then
      if ready_done then return nil end
      local n = limit + 1
      local raw = redis.call('ZRANGEBYSCORE', K_READY, '-inf', fmt(now), 'WITHSCORES', 'LIMIT', offset, n)
      offset = offset + #raw / 2
      if #raw < 2 * n then ready_done = true end
      page = {}
      for i = 1, #raw, 2 do page[#page + 1] = {id = raw[i], due = tonumber(raw[i + 1])} end
      pi = 1
      if #page == 0 then return nil end
    end
    local m = page[pi]
    if not seen[m.id] then return m end
    pi = pi + 1
  end
end
while #cands < limit and examined < limit + BUDGET do
  local rm = next_ready()
  local mm = moved[mi]
  local pick
  if rm and (not mm or rm.due < mm.due or (rm.due == mm.due and rm.id < mm.id)) then
    pick = rm
    pi = pi + 1
  elseif mm then
    pick = mm
    mi = mi + 1
  else
    break
  end
  examined = examined + 1
  local id = pick.id
  seen[id] = true
  local r, problem = pick.r, nil
  if r == nil and pick == rm then r, problem = inspect(id) end
  if problem then
    quarantine(id, problem)
  elseif r == nil then
    stale[#stale + 1] = id
  else
    local e = effective(r, now)
    if claimable(e, now) then
      problem = payload_problem(id)
      if problem then
        quarantine(id, problem)
      else
        cands[#cands + 1] = {id = id, r = r, e = e}
      end
    else
      replace[#replace + 1] = r
    end
  end
end

-- ---- check the token counter (issue 11): nothing has been written yet ----
local base = 0
if #cands > 0 then
  local raw = redis.call('GET', P .. 'token')
  if raw then
    if not (raw == '0' or string.match(raw, '^[1-9]%d*$')) or #raw > 16 then
      error({err = 'LEASETOKEN the counter holds ' .. string.format('%q', string.sub(raw, 1, 40)) .. ', not a token'})
    end
    base = tonumber(raw)
  end
  if base + #cands > MAX_TOKEN then
    error({err = 'LEASETOKEN the next ' .. #cands .. ' tokens after ' .. fmt(base) .. ' would pass 2^53 - 1, the last token this backend issues exactly'})
  end
  for i, c in ipairs(cands) do
    if base + i <= c.r.tk then
      error({err = 'LEASETOKEN next token ' .. fmt(base + i) .. ' is not above token ' .. fmt(c.r.tk) .. ' of execution ' .. c.id .. ' (set the counter above the highest stored token)'})
    end
  end
end

-- ---- write ----
for _, m in ipairs(moves) do
  redis.call('ZREM', K_WAITING, m[1])
  if m[2] ~= nil then redis.call('ZADD', K_READY, fmt(m[2]), m[1]) end
end
for _, c in ipairs(corrupt) do
  redis.call('ZREM', K_READY, c[1])
  redis.call('ZREM', K_WAITING, c[1])
  redis.call('ZREM', K_RUNNING, c[1])
  redis.call('ZREM', K_FAILING, c[1])
  redis.call('ZADD', K_CORRUPT, 0, c[1])
  redis.call('HSET', K_CORRUPT_WHY, c[1], c[2])
end
for _, id in ipairs(stale) do redis.call('ZREM', K_READY, id) end
for _, r in ipairs(replace) do reindex(r) end

local out = {}
local earliest = nil
if #cands > 0 then
  local top = redis.call('INCRBY', P .. 'token', #cands)
  if top ~= base + #cands then error({err = 'LEASETOKEN the counter moved during the claim'}) end
end
for i, c in ipairs(cands) do
  local e = c.e
  if e == c.r then e = copy(c.r) end
  e.tk = base + i
  e.st = 'running'
  e.le = now + lease_ms
  e.wk = nil
  save(e, c.r)
  place(e, c.r)
  out[#out + 1] = c.id
  out[#out + 1] = fmt(e.tk)
  out[#out + 1] = fmt(e.le)
  if with_records then out[#out + 1] = redis.call('HGETALL', k_exec(c.id)) end
  earliest = min_opt(earliest, (claimable_at(e)))
end
publish_wake(ARGV[7], earliest)
if #corrupt > 0 then
  local report = {'corrupt'}
  for _, c in ipairs(corrupt) do
    report[#report + 1] = c[1]
    report[#report + 1] = c[2]
  end
  out[#out + 1] = report
end
if not with_horizon then return out end

-- The earliest claimable instant left: every member's score is never later than its
-- claimable_at (see slots), and an execution with a claimable instant is in ready or
-- waiting (a running one too, scored from its lease expiry), so the first score of each
-- set bounds it from below; a member of either still at or before now (work this call's
-- bounds left) is claimable now.
local function first_score(key)
  local m = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if #m == 0 then return nil end
  return tonumber(m[2])
end
local next_at = min_opt(first_score(K_READY), first_score(K_WAITING))
local reply = {fmt(now), next_at and fmt(next_at) or ''}
for i = 1, #out do reply[i + 2] = out[i] end
return reply
