-- lease-redis: helpers every script starts with.
--
-- KEYS[1] is the prefix `lease:{<namespace>}:` (or, with partitions, the partition's
-- `lease:{<namespace>#<i>}:`). Every key a script touches starts with it, so all of them
-- share one hash slot (its hash tag): cluster-ready. The library's scripts also declare
-- KEYS[2], the prefix's `meta` (which exists, while KEYS[1] never does), so that during a
-- slot migration Redis refuses the script with TRYAGAIN instead of running it on a node
-- holding only some of the slot's keys; the scripts never read KEYS[2].
-- ARGV[1] is the injected clock in milliseconds, or '' to read Redis TIME; ARGV[2] is the
-- redelivery table (RedeliveryPolicy::table_ms(), comma separated); operation arguments
-- start at ARGV[3].
--
-- Numbers: Lua numbers are doubles. Millisecond timestamps and fencing tokens stay below
-- 2^53, where doubles are exact; they travel as decimal strings written with '%.0f'
-- (tostring would round to 14 digits).
--
-- Scripts are run per call, so every function defined here is created on every call: keep
-- this file to what every script uses (ops.lua, record.lua and the others hold the rest;
-- the step writers, write_step and the fenced scripts, take only this and step.lua).
local P = KEYS[1]
-- The helpers are fields of H, not locals: Lua creates every helper again on each call,
-- and a local helper captures each helper it calls as an upvalue, found by a walk down the
-- list of open upvalues (as long as the helpers are many), which made the definitions cost
-- more than most scripts' work. A field costs one upvalue (H) and a table read per call.
local H = {}

function H.k_exec(id) return P .. 'exec:' .. id end

function H.fmt(n) return string.format('%.0f', n) end

-- A stored value this library never writes: abort before any write, reported as
-- LeaseError::Protocol by the client.
function H.corrupt(what) error({err = 'LEASECORRUPT ' .. what}) end

-- The integer stored in field `field` of execution `id` (at most 16 digits: every stored
-- number is below 2^53).
function H.int(s, id, field)
  if not s or #s > 17 or not string.match(s, '^%-?%d+$') then
    H.corrupt('execution ' .. id .. ': ' .. field)
  end
  return tonumber(s)
end

local STATUSES = {admitted = true, running = true, suspended = true, completed = true, failed = true,
  cancelled = true, dead = true}

-- The script's clock: ARGV[1] (the injected clock), or Redis TIME when it is ''.
function H.clock_now()
  local a = ARGV[1]
  if a ~= '' then return tonumber(a) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- True when the running delivery of `r` is the last its attempt limit (`al`, copied onto
-- the record by the claim) allows: its expiry ends the execution as dead.
function H.last_attempt(r)
  return r.al ~= nil and r.un + 1 >= r.al
end

-- ExecutionRecord::holds_at on the stored record: 'held', 'lost', 'zero' (token 0 is never
-- issued) or 'foreign' (a token above the execution's own). The clock is consulted only for
-- a last attempt: once its lease expired the execution reads as dead, so its holder lost
-- it (any other expired lease still holds until a claim takes the execution over).
function H.check_lease(r, token_s)
  local token = tonumber(token_s)
  if token == 0 then return 'zero' end
  if token > r.tk then return 'foreign' end
  if token ~= r.tk or r.st ~= 'running' then return 'lost' end
  if H.last_attempt(r) and r.le <= H.clock_now() then return 'lost' end
  return 'held'
end
