-- lease-redis: helpers most scripts use after base.lua: the clock, the key-type check,
-- wake-ups and record creation.

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
-- Refuses, as WRONGTYPE, a `key` that exists with a type other than `kind`.
local function check_key_type(key, kind)
  local t = redis.call('TYPE', key)
  t = t.ok or t
  if t ~= kind and t ~= 'none' then
    error({err = 'WRONGTYPE ' .. key .. ' holds a ' .. t .. ', expected a ' .. kind})
  end
end

local function check_key_types()
  local want = {ready = 'zset', waiting = 'zset', running = 'zset', failing = 'zset',
    done = 'zset', corrupt = 'zset', corrupt_why = 'hash', token = 'string', levels = 'zset'}
  for name, kind in pairs(want) do check_key_type(P .. name, kind) end
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

-- ---- priority levels and keys (issue 21 items 3 and 4) ----
-- Level 0 (the default) is `ready`, as before priorities existed; level p ~= 0 is the zset
-- `ready:<p>`, listed in the zset `levels` (member and score p) while it holds members, so a
-- claim walks the levels highest first and each level in (due, id) order. A running keyed
-- execution is in `live:<key>`, scored by its lease expiry (its key's live leases are the
-- members scored after the claim's instant).

-- The ready set of priority level `pr`.
local function ready_key(pr)
  if pr == 0 then return P .. 'ready' end
  return P .. 'ready:' .. fmt(pr)
end

-- Adds `id` to the ready set of level `pr` with `score` (a string), listing the level.
local function ready_add(pr, score, id)
  redis.call('ZADD', ready_key(pr), score, id)
  if pr ~= 0 then redis.call('ZADD', P .. 'levels', pr, fmt(pr)) end
end

-- Removes `id` from the ready set of level `pr`; a level left empty leaves `levels`.
local function ready_rem(pr, id)
  local key = ready_key(pr)
  if redis.call('ZREM', key, id) == 1 and pr ~= 0 and redis.call('ZCARD', key) == 0 then
    redis.call('ZREM', P .. 'levels', fmt(pr))
  end
end

-- The set of the live leases of concurrency key `ck`.
local function live_key(ck) return P .. 'live:' .. ck end

-- A new admitted execution's hash: ExecutionRecord::admitted, due at `due` (now, or the
-- admission's not_before), with priority `pr` (a number; 0 is not stored), concurrency
-- key `ck` ('' = none) and W3C trace context `tc` ('' or nil = none).
local function create_record(id, workflow, input, due, pr, ck, tc)
  local fields = {'st', 'admitted', 'tk', '0', 'un', '0', 'es', '0', 'du', fmt(due)}
  local function add(name, value)
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  end
  if workflow ~= '' then add('wf', workflow) end
  if input ~= '' then add('in', input) end
  if pr ~= 0 then add('pr', fmt(pr)) end
  if ck ~= '' then add('ck', ck) end
  if tc ~= nil and tc ~= '' then add('tc', tc) end
  redis.call('HSET', k_exec(id), unpack(fields))
end

-- A new admitted execution due at `due`: always in its level's ready set, scored by `due`
-- (no delivery yet, so no redelivery gate; a claim takes only members scored at or before
-- its now, so a scheduled execution is not claimable before its time).
local function create(id, workflow, input, due, pr, ck, tc)
  create_record(id, workflow, input, due, pr, ck, tc)
  ready_add(pr, fmt(due), id)
end
