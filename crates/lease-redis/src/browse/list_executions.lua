-- list_executions(filter, after, limit) on this prefix: the records the filter matches,
-- newest admitted (highest `sq`) first, strictly before sequence `after`, at most `limit`.
-- ARGV[3] status ('' = any), ARGV[4] workflow ('' = any), ARGV[5] key ('' = any),
-- ARGV[6] after ('' = from the newest), ARGV[7] limit.
-- Reply: {now, more ('1' | '0'), last sequence examined ('' = none), sq1, id1, HGETALL1,
-- ...}: `more` when matches may lie past the last record (or past the last sequence
-- examined, when stale entries cut the page short).
--
-- Reads the browse set of the filter (see ops.lua), or merges the seven statuses' sets
-- when no status is given, newest first, in pages of limit + 1: the work is the page's,
-- whatever is stored. Each entry is checked against its record (stored status, sequence,
-- workflow, key) before it is listed, so an entry a record no longer matches is skipped.
local now = H.clock_now()
local wf, ck = ARGV[4], ARGV[5]
if wf == '' then wf = nil end
if ck == '' then ck = nil end
local limit = tonumber(ARGV[7])
local top = '+inf'
if ARGV[6] ~= '' then top = '(' .. ARGV[6] end

-- The browse set of status `st` this filter reads.
local function set_of(st)
  local base = P .. 'ls:' .. st
  if wf and ck then return base .. '\31wk\31' .. wf .. '\31' .. ck end
  if wf then return base .. '\31w\31' .. wf end
  if ck then return base .. '\31k\31' .. ck end
  return base
end

-- A reader of status `st`'s set, newest first: peek() the next {sq, id} or nil, take().
local function reader(st)
  local key, below, page, pi, done = set_of(st), top, {}, 1, false
  local r = {st = st}
  function r.peek()
    if pi > #page then
      if done then return nil end
      local raw = redis.call('ZREVRANGEBYSCORE', key, below, '-inf', 'WITHSCORES', 'LIMIT', 0, limit + 1)
      if #raw < 2 * (limit + 1) then done = true end
      page, pi = {}, 1
      for i = 1, #raw, 2 do page[#page + 1] = {sq = tonumber(raw[i + 1]), id = raw[i]} end
      if #page == 0 then return nil end
      below = '(' .. raw[#raw]
    end
    return page[pi]
  end
  function r.take() pi = pi + 1 end
  return r
end

local readers = {}
if ARGV[3] ~= '' then
  readers[1] = reader(ARGV[3])
else
  for st in pairs(STATUSES) do readers[#readers + 1] = reader(st) end
end

-- The reader whose next entry is the newest, or nil when all are done.
local function newest()
  local best, best_sq = nil, nil
  for _, r in ipairs(readers) do
    local m = r.peek()
    if m and (best_sq == nil or m.sq > best_sq) then best, best_sq = r, m.sq end
  end
  return best
end

-- True when `id`'s record still matches the entry `m` of status `st`'s set.
local function matches(m, st)
  local v = redis.call('HMGET', H.k_exec(m.id), 'st', 'sq', 'wf', 'ck')
  return v[1] == st and tonumber(v[2]) == m.sq and (wf == nil or v[3] == wf)
    and (ck == nil or v[4] == ck)
end

local out = {H.fmt(now), '0', ''}
local taken, examined = 0, 0
local skip_budget = 10 * limit + 100
while true do
  local r = newest()
  if r == nil then break end
  if taken == limit or examined - taken >= skip_budget then
    out[2] = '1'
    break
  end
  local m = r.peek()
  r.take()
  examined = examined + 1
  out[3] = H.fmt(m.sq)
  if matches(m, r.st) then
    out[#out + 1] = H.fmt(m.sq)
    out[#out + 1] = m.id
    out[#out + 1] = redis.call('HGETALL', H.k_exec(m.id))
    taken = taken + 1
  end
end
return out
