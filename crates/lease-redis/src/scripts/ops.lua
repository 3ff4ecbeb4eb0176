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
