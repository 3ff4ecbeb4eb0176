-- claim_due(now, limit, duration): claims up to `limit` claimable executions in
-- (due_at, id) order, each with the next value of the namespace's token counter.
-- ARGV[3] the caller's now ('' = the clock's), ARGV[4] limit, ARGV[5] lease ms,
-- ARGV[6] (optional) '1' to return each claimed record, ARGV[7] (optional) wake publish
-- command (see publish_wake), ARGV[8] (optional) '1' to return the horizon.
-- Reply: {id1, token1, expires_at1, id2, ...}; with records
-- {id1, token1, expires_at1, HGETALL1, id2, ...}, each HGETALL taken right after the claim
-- (what get reads then); with the horizon, the same preceded by {now, next}, `next` the
-- earliest claimable instant left in the namespace ('' = none).
-- Publishes the earliest claimable instant of the new leases (lease expiry plus the delay a
-- lapse would then owe), so idle dispatchers elsewhere arm a timer for it.
local now = clock_now()
if ARGV[3] ~= '' then
  local requested = tonumber(ARGV[3])
  if requested < now then now = requested end
end
local limit = tonumber(ARGV[4])
local lease_ms = tonumber(ARGV[5])
local with_records = ARGV[6] == '1'
local with_horizon = ARGV[8] == '1'

-- Executions whose claimable instant has passed move to ready, scored by due time.
for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_WAITING, '-inf', fmt(now))) do
  local r = load(id)
  redis.call('ZREM', K_WAITING, id)
  if r ~= nil and not terminal(r.st) then
    local due = r.du
    if r.st == 'running' then due = min_opt(r.du, r.wk) end
    if due ~= nil then redis.call('ZADD', K_READY, fmt(due), id) end
  end
end

local out = {}
local claimed = 0
local earliest = nil
-- Every member fetched is either claimed or re-placed out of the fetched score range
-- (ready, due > now; or waiting), so the loop ends; the bound is a second guard.
local rounds = 0
local stopped = false
while not stopped and claimed < limit and rounds < 10000 do
  rounds = rounds + 1
  local ids = redis.call('ZRANGEBYSCORE', K_READY, '-inf', fmt(now), 'LIMIT', 0, limit - claimed)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local ok, r = pcall(load, id)
    if not ok then
      -- A corrupt record: report it, unless leases were already issued in this call,
      -- which must reach their holders (the next call reports it).
      if claimed > 0 then
        stopped = true
        break
      end
      if type(r) == 'table' then error(r) end
      -- pcall hands back the message with the script position prepended.
      local msg = tostring(r)
      local at = string.find(msg, 'LEASECORRUPT', 1, true)
      if at then error({err = string.sub(msg, at)}) end
      error(r)
    end
    if r == nil then
      redis.call('ZREM', K_READY, id)
    else
      local e = effective(r, now)
      if claimable(e, now) then
        if e == r then e = copy(r) end
        e.tk = redis.call('INCR', P .. 'token')
        e.st = 'running'
        e.le = now + lease_ms
        e.wk = nil
        save(e, r)
        place(e, r)
        out[#out + 1] = id
        out[#out + 1] = fmt(e.tk)
        out[#out + 1] = fmt(e.le)
        if with_records then out[#out + 1] = redis.call('HGETALL', k_exec(id)) end
        earliest = min_opt(earliest, (claimable_at(e)))
        claimed = claimed + 1
      else
        reindex(r)
      end
    end
  end
end
publish_wake(ARGV[7], earliest)
if not with_horizon then return out end

-- The earliest claimable instant left: every member's score is never later than its
-- claimable_at (see slots), and an execution with a claimable instant is in ready or
-- waiting (a running one too, scored from its lease expiry), so the first score of each
-- set bounds it from below; a member of either still at or before now is claimable now.
local function first_score(key)
  local m = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if #m == 0 then return nil end
  return tonumber(m[2])
end
local next_at = min_opt(first_score(K_READY), first_score(K_WAITING))
local reply = {fmt(now), next_at and fmt(next_at) or ''}
for i = 1, #out do reply[i + 2] = out[i] end
return reply
