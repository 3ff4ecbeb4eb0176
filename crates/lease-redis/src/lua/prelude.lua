-- lease-redis: helpers prepended to every script.
--
-- KEYS[1] is the namespace prefix `lease:{<namespace>}:`. Every key a script touches starts
-- with it, so all of them share one hash slot (the `{<namespace>}` hash tag): cluster-ready.
-- ARGV[1] is the injected clock in milliseconds, or '' to read Redis TIME; ARGV[2] is the
-- redelivery table (RedeliveryPolicy::table_ms(), comma separated); operation arguments
-- start at ARGV[3].
--
-- Numbers: Lua numbers are doubles. Millisecond timestamps and fencing tokens stay below
-- 2^53, where doubles are exact; they travel as decimal strings written with '%.0f'
-- (tostring would round to 14 digits).
local P = KEYS[1]
local K_TOKEN = P .. 'token'
local K_READY = P .. 'ready'
local K_WAITING = P .. 'waiting'
local K_RUNNING = P .. 'running'
local K_FAILING = P .. 'failing'
local K_STARTS = P .. 'starts'

local function k_exec(id) return P .. 'exec:' .. id end
local function k_steps(id) return P .. 'steps:' .. id end
local function k_store(s) return P .. 'store:' .. s end
local function k_receipts(s) return P .. 'receipts:' .. s end

local function fmt(n) return string.format('%.0f', n) end

-- A stored value this library never writes: abort before any write, reported as
-- LeaseError::Protocol by the client.
local function corrupt(what) error({err = 'LEASECORRUPT ' .. what}) end

local function int(s, what)
  if type(s) ~= 'string' or not string.match(s, '^%-?%d+$') then corrupt(what) end
  return tonumber(s)
end

local function opt_int(s, what)
  if s == nil or s == false then return nil end
  return int(s, what)
end

local function clock_now()
  local a = ARGV[1]
  if a ~= '' then return tonumber(a) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local TABLE = {}
for v in string.gmatch(ARGV[2], '%d+') do TABLE[#TABLE + 1] = tonumber(v) end

-- RedeliveryPolicy::delay(n) = table[min(n, len)].
local function delay(n)
  if n <= 0 then return 0 end
  if n > #TABLE then n = #TABLE end
  return TABLE[n]
end

local function min_opt(a, b)
  if a == nil then return b end
  if b == nil then return a end
  if b < a then return b end
  return a
end

local function terminal(st) return st == 'completed' or st == 'failed' end

local STATUSES = {admitted = true, running = true, suspended = true, completed = true, failed = true}

-- The stored record of `id` (validated), or nil when there is none.
local function load(id)
  local raw = redis.call('HGETALL', k_exec(id))
  if #raw == 0 then return nil end
  local h = {}
  for i = 1, #raw, 2 do h[raw[i]] = raw[i + 1] end
  local what = 'execution ' .. id .. ': '
  local r = {id = id}
  r.st = h.st
  if not STATUSES[r.st] then corrupt(what .. 'status') end
  r.tk = int(h.tk, what .. 'token')
  r.un = int(h.un, what .. 'unacknowledged deliveries')
  r.du = opt_int(h.du, what .. 'due_at')
  r.le = opt_int(h.le, what .. 'lease_expires_at')
  r.wk = opt_int(h.wk, what .. 'wake_after_claim')
  r.ld = opt_int(h.ld, what .. 'last_delivery_ended_at')
  if h.es ~= '0' and h.es ~= '1' then corrupt(what .. 'ever_suspended') end
  r.es = h.es == '1'
  if r.st == 'running' and r.le == nil then corrupt(what .. 'running without a lease expiry') end
  return r
end

-- Writes the state-machine fields of `r` (outcome and payload fields are written apart).
local function save(r)
  local key = k_exec(r.id)
  local set = {'st', r.st, 'tk', fmt(r.tk), 'un', fmt(r.un), 'es', r.es and '1' or '0'}
  local del = {}
  for _, f in ipairs({'du', 'le', 'wk', 'ld'}) do
    if r[f] == nil then
      del[#del + 1] = f
    else
      set[#set + 1] = f
      set[#set + 1] = fmt(r[f])
    end
  end
  redis.call('HSET', key, unpack(set))
  if #del > 0 then redis.call('HDEL', key, unpack(del)) end
end

-- Puts `r` into the indexes its stored state calls for:
--   running: running executions by lease expiry (list_failing finds expired ones);
--   failing: executions with unacknowledged deliveries, scored -count (most failing first,
--            then id, since equal scores sort by member);
--   ready:   due executions whose redelivery gate (if any) is open by their due time,
--            scored by due_at, so claim order is (due_at, id);
--   waiting: executions whose claimable instant max(due_at, gate) lies after due_at,
--            scored by that instant; claim_due moves them to ready once it has passed.
-- A running execution's gate is its lease expiry plus the delay it will then owe.
local function place(r)
  local id = r.id
  if r.st == 'running' then
    redis.call('ZADD', K_RUNNING, fmt(r.le), id)
  else
    redis.call('ZREM', K_RUNNING, id)
  end
  if r.un > 0 then
    redis.call('ZADD', K_FAILING, fmt(-r.un), id)
  else
    redis.call('ZREM', K_FAILING, id)
  end
  local due, at = nil, nil
  if r.st == 'running' then
    due = min_opt(r.du, r.wk)
    if due ~= nil then at = math.max(due, r.le + delay(r.un + 1)) end
  elseif not terminal(r.st) then
    due = r.du
    if due ~= nil then
      at = due
      if r.un > 0 and r.ld ~= nil then at = math.max(due, r.ld + delay(r.un)) end
    end
  end
  if at == nil then
    redis.call('ZREM', K_READY, id)
    redis.call('ZREM', K_WAITING, id)
  elseif at <= due then
    redis.call('ZADD', K_READY, fmt(due), id)
    redis.call('ZREM', K_WAITING, id)
  else
    redis.call('ZADD', K_WAITING, fmt(at), id)
    redis.call('ZREM', K_READY, id)
  end
end

-- ExecutionRecord::effective: a running delivery whose lease expired at or before `now`
-- reads as ended without acknowledgement at its expiry.
local function effective(r, now)
  if r.st ~= 'running' or r.le > now then return r end
  local e = {}
  for k, v in pairs(r) do e[k] = v end
  e.un = r.un + 1
  e.ld = r.le
  e.du = min_opt(r.du, r.wk)
  e.wk = nil
  e.le = nil
  if r.es then e.st = 'suspended' else e.st = 'admitted' end
  return e
end

-- ExecutionRecord::claimable on an effective record.
local function claimable(e, now)
  if terminal(e.st) or e.st == 'running' then return false end
  if e.du == nil or e.du > now then return false end
  if e.un > 0 and e.ld ~= nil and now < e.ld + delay(e.un) then return false end
  return true
end

-- ExecutionRecord::holds on the stored record: 'held', 'lost', 'zero' (token 0 is never
-- issued) or 'foreign' (a token above the execution's own). No clock is consulted.
local function check_lease(r, token_s)
  local token = tonumber(token_s)
  if token == 0 then return 'zero' end
  if token > r.tk then return 'foreign' end
  if token == r.tk and r.st == 'running' then return 'held' end
  return 'lost'
end

-- A new admitted execution, due now.
local function create(id, workflow, input, now)
  local fields = {'st', 'admitted', 'tk', '0', 'un', '0', 'es', '0', 'du', fmt(now)}
  if workflow ~= '' then
    fields[#fields + 1] = 'wf'
    fields[#fields + 1] = workflow
  end
  if input ~= '' then
    fields[#fields + 1] = 'in'
    fields[#fields + 1] = input
  end
  redis.call('HSET', k_exec(id), unpack(fields))
  redis.call('ZADD', K_READY, fmt(now), id)
end
