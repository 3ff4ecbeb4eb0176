-- lease-redis: helpers every script starts with.
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
--
-- Scripts are run per call, so every function defined here is created on every call: keep
-- this file to what most scripts use (policy.lua and record.lua hold the rest).
local P = KEYS[1]

local function k_exec(id) return P .. 'exec:' .. id end

local function fmt(n) return string.format('%.0f', n) end

-- A stored value this library never writes: abort before any write, reported as
-- LeaseError::Protocol by the client.
local function corrupt(what) error({err = 'LEASECORRUPT ' .. what}) end

-- The integer stored in field `field` of execution `id` (at most 16 digits: every stored
-- number is below 2^53).
local function int(s, id, field)
  if not s or #s > 17 or not string.match(s, '^%-?%d+$') then
    corrupt('execution ' .. id .. ': ' .. field)
  end
  return tonumber(s)
end

local function clock_now()
  local a = ARGV[1]
  if a ~= '' then return tonumber(a) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The keys a record-changing script may write besides the records: the four index sorted
-- sets, the terminal index `done` (acknowledgements, purge_terminal), the corrupt list
-- (claim_due) and the token counter. Checked before the script's first write, so a foreign key of
-- the wrong type there (another program writing into our prefix) is a WRONGTYPE error that
-- changed nothing (LeaseError::Schema), never a failure half-way through the writes.
local function check_key_types()
  local want = {ready = 'zset', waiting = 'zset', running = 'zset', failing = 'zset',
    done = 'zset', corrupt = 'zset', corrupt_why = 'hash', token = 'string'}
  for name, kind in pairs(want) do
    local t = redis.call('TYPE', P .. name)
    t = t.ok or t
    if t ~= kind and t ~= 'none' then
      error({err = 'WRONGTYPE ' .. P .. name .. ' holds a ' .. t .. ', expected a ' .. kind})
    end
  end
end

local STATUSES = {admitted = true, running = true, suspended = true, completed = true, failed = true}

-- ExecutionRecord::holds on the stored record: 'held', 'lost', 'zero' (token 0 is never
-- issued) or 'foreign' (a token above the execution's own). No clock is consulted.
local function check_lease(r, token_s)
  local token = tonumber(token_s)
  if token == 0 then return 'zero' end
  if token > r.tk then return 'foreign' end
  if token == r.tk and r.st == 'running' then return 'held' end
  return 'lost'
end

-- Wake-ups (issue 10): tells every listening dispatcher that an execution is claimable from
-- backend-clock instant `at` (ExecutionRecord::claimable_at of the record the script just
-- wrote), on the channel `<prefix>wake`, which carries the namespace's hash tag. `cmd` is
-- the publish command chosen at connect from the server version: 'SPUBLISH' (Redis >= 7:
-- sharded, the message stays in the namespace's slot), 'PUBLISH', or '' (no listener can
-- exist: nothing is sent). Called once per script, after its writes; a failed publish is
-- ignored (pcall), because correctness never rests on a wake-up.
local function publish_wake(cmd, at)
  if at == nil or (cmd ~= 'SPUBLISH' and cmd ~= 'PUBLISH') then return end
  redis.pcall(cmd, P .. 'wake', fmt(at))
end

-- A new admitted execution's hash: ExecutionRecord::admitted, due at `due` (now, or the
-- admission's not_before).
local function create_record(id, workflow, input, due)
  local fields = {'st', 'admitted', 'tk', '0', 'un', '0', 'es', '0', 'du', fmt(due)}
  if workflow ~= '' then
    fields[#fields + 1] = 'wf'
    fields[#fields + 1] = workflow
  end
  if input ~= '' then
    fields[#fields + 1] = 'in'
    fields[#fields + 1] = input
  end
  redis.call('HSET', k_exec(id), unpack(fields))
end

-- A new admitted execution due at `due`: always in ready, scored by `due` (no delivery yet,
-- so no redelivery gate; a claim takes only members scored at or before its now, so a
-- scheduled execution is not claimable before its time).
local function create(id, workflow, input, due)
  create_record(id, workflow, input, due)
  redis.call('ZADD', P .. 'ready', fmt(due), id)
end
