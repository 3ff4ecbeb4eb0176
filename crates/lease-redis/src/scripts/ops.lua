-- lease-redis: helpers most scripts use after base.lua: the key-type check,
-- wake-ups and record creation.

-- The keys a record-changing script may write besides the records: the four index sorted
-- sets, the terminal index `done` (acknowledgements, purge_terminal), the corrupt list
-- (claim_due) and the token counter. Checked before the script's first write, so a foreign key of
-- the wrong type there (another program writing into our prefix) is a WRONGTYPE error that
-- changed nothing (LeaseError::Schema), never a failure half-way through the writes.
-- Refuses, as WRONGTYPE, a `key` that exists with a type other than `kind`.
function H.check_key_type(key, kind)
  local t = redis.call('TYPE', key)
  t = t.ok or t
  if t ~= kind and t ~= 'none' then
    error({err = 'WRONGTYPE ' .. key .. ' holds a ' .. t .. ', expected a ' .. kind})
  end
end

function H.check_key_types()
  local want = {ready = 'zset', waiting = 'zset', running = 'zset', failing = 'zset',
    done = 'zset', corrupt = 'zset', corrupt_why = 'hash', token = 'string', levels = 'zset',
    running_es = 'zset', counts = 'hash', parked = 'zset', dead = 'zset', running_last = 'zset',
    attempts = 'hash', seq = 'string', redelivery = 'hash'}
  for name, kind in pairs(want) do H.check_key_type(P .. name, kind) end
end

-- Wake-ups: tells every listening dispatcher that an execution is claimable from
-- backend-clock instant `at` (ExecutionRecord::claimable_at of the record the script just
-- wrote), on the channel `<prefix>wake`, which carries the namespace's hash tag. `cmd` is
-- the publish command chosen at connect from the server version: 'SPUBLISH' (Redis >= 7:
-- sharded, the message stays in the namespace's slot), 'PUBLISH', or '' (no listener can
-- exist: nothing is sent). Called once per script, after its writes; a failed publish is
-- ignored (pcall), because correctness never rests on a wake-up.
function H.publish_wake(cmd, at)
  if at == nil or (cmd ~= 'SPUBLISH' and cmd ~= 'PUBLISH') then return end
  redis.pcall(cmd, P .. 'wake', H.fmt(at))
end

-- ---- deferred index writes: one command per sorted set and per counter for a batch ----
-- Inside deferred(fn) (a claim's leases, a batch of acknowledgements or admissions), the
-- writes of the browse sets, the status counters and the sets named in zset_put are
-- gathered and written after fn: one ZREM and one ZADD per sorted set, one HINCRBY per
-- status, instead of one of each per record. Only sets no step of the batch reads go
-- through here (the batch's own reads of `ready`, `waiting` and the others come before it or
-- after the flush). The last write of a member wins, as the commands would have left it.
-- Outside deferred(fn) every write goes out at once, as before.
local DEFER = nil
-- Values one command takes at most when a deferred write is flushed (Lua's unpack limit
-- lies far above; many small commands cost more than a few big ones).
local FLUSH_CHUNK = 1000

-- Sets member `id` of sorted set `key` to `score` (a string), or takes it out (nil).
function H.zset_put(key, id, score)
  if DEFER == nil then
    if score then redis.call('ZADD', key, score, id) else redis.call('ZREM', key, id) end
    return
  end
  local k = DEFER.sets[key]
  if not k then
    k = {}
    DEFER.sets[key] = k
    DEFER.keys[#DEFER.keys + 1] = key
  end
  k[id] = score or false
end

-- Sends `cmd key args...` for `args` in chunks of FLUSH_CHUNK values (`step` values per
-- member, so a member's score and id stay in one command).
function H.send_chunked(cmd, key, args, step)
  local n = math.floor(FLUSH_CHUNK / step) * step
  for i = 1, #args, n do
    redis.call(cmd, key, unpack(args, i, math.min(i + n - 1, #args)))
  end
end

-- Writes what deferred(fn) gathered: per set its removals then its additions (a member is in
-- one of them only, its last write), then the counters' net changes.
function H.defer_flush(d)
  for _, key in ipairs(d.keys) do
    local add, rem = {}, {}
    for id, score in pairs(d.sets[key]) do
      if score then
        add[#add + 1] = score
        add[#add + 1] = id
      else
        rem[#rem + 1] = id
      end
    end
    if #rem > 0 then H.send_chunked('ZREM', key, rem, 1) end
    if #add > 0 then H.send_chunked('ZADD', key, add, 2) end
  end
  for status, n in pairs(d.counts) do
    if n ~= 0 then redis.call('HINCRBY', P .. 'counts', status, n) end
  end
end

-- Runs fn() with the index writes deferred, then writes them, even when fn raised an error
-- (which is raised again after), so an error leaves the indexes as the writes before it did.
function H.deferred(fn)
  if DEFER ~= nil then return fn() end
  DEFER = {sets = {}, keys = {}, counts = {}}
  local ok, a, b, c = pcall(fn)
  local d = DEFER
  DEFER = nil
  H.defer_flush(d)
  if not ok then error(a, 0) end
  return a, b, c
end

-- ---- priority levels and concurrency keys ----
-- Level 0 (the default) is `ready`, as before priorities existed; level p ~= 0 is the zset
-- `ready:<p>`, listed in the zset `levels` (member and score p) while it holds members, so a
-- claim walks the levels highest first and each level in (due, id) order. A running keyed
-- execution is in `live:<key>`, scored by its lease expiry (its key's live leases are the
-- members scored after the claim's instant).

-- The ready set of priority level `pr`.
function H.ready_key(pr)
  if pr == 0 then return P .. 'ready' end
  return P .. 'ready:' .. H.fmt(pr)
end

-- Adds `id` to the ready set of level `pr` with `score` (a string), listing the level.
function H.ready_add(pr, score, id)
  if pr == 0 then return H.zset_put(P .. 'ready', id, score) end
  redis.call('ZADD', H.ready_key(pr), score, id)
  redis.call('ZADD', P .. 'levels', pr, H.fmt(pr))
end

-- Removes `id` from the ready set of level `pr`; a level left empty leaves `levels`.
function H.ready_rem(pr, id)
  if pr == 0 then return H.zset_put(P .. 'ready', id, nil) end
  local key = H.ready_key(pr)
  if redis.call('ZREM', key, id) == 1 and pr ~= 0 and redis.call('ZCARD', key) == 0 then
    redis.call('ZREM', P .. 'levels', H.fmt(pr))
  end
end

-- The set of the live leases of concurrency key `ck`.
function H.live_key(ck) return P .. 'live:' .. ck end

-- ---- parking: held-back members cost a claim once ----
-- A claim that finds a due member held back (its workflow paused, its key at its limit)
-- parks it: out of its ready set into the zset `parked:<scope>` of its gate ('w:<workflow>'
-- or 'k:<key>'), member park_member(...) under score 0, so the set's lexical order is the
-- claim order; the record's field `pk` names the entry (scope, \31, member), so any
-- script that changes the record takes it out again (place, reindex). The zset `parked`
-- lists the scopes holding members, scored by the earliest instant the gate may open:
-- PARK_NOW (look at it at the next claim: a lease of the key ended, a limit changed, the
-- workflow was resumed), a lease expiry of the key (lowered by every new or renewed lease),
-- or PARK_NEVER (only an event opens it: a paused workflow, a key without live leases).
-- Claims bring members of open scopes back, bounded per call (scripts/claim.lua).
local K_PARKED = P .. 'parked'
local PARK_NOW = -9007199254740992
local PARK_NEVER = 9007199254740992
-- due + 2^52 lies in 0 ..= 2^53 for every accepted timestamp: 16 digits.
local PARK_DUE_BIAS = 4503599627370496

-- The set of the members parked under `scope`.
function H.parked_set(scope) return P .. 'parked:' .. scope end

-- The parked member of execution `id` of priority `pr` due at `due`: 1000 - pr in four
-- digits, due + 2^52 in sixteen, then the id, so members sort in claim order (priority
-- descending, due, id).
function H.park_member(pr, due, id)
  local d = H.fmt(due + PARK_DUE_BIAS)
  return string.format('%04d', 1000 - pr) .. string.rep('0', 16 - #d) .. d .. id
end

-- The priority, due time and id a parked member encodes.
function H.park_decode(m)
  return 1000 - tonumber(string.sub(m, 1, 4)), tonumber(string.sub(m, 5, 20)) - PARK_DUE_BIAS,
    string.sub(m, 21)
end

-- Lowers the instant from which a claim looks at `scope` to `at`; with `add`, lists the
-- scope when it is not listed yet.
function H.park_schedule(scope, at, add)
  local s = redis.call('ZSCORE', K_PARKED, scope)
  if (s == false and add) or (s and tonumber(s) > at) then
    redis.call('ZADD', K_PARKED, H.fmt(at), scope)
  end
end

-- Takes the parked entry `pk` (a record's field) out of its scope's set; a scope left
-- empty leaves `parked`.
function H.unpark_entry(pk)
  local at = string.find(pk, '\31', 1, true)
  if not at then return end
  local scope = string.sub(pk, 1, at - 1)
  local set = H.parked_set(scope)
  redis.call('ZREM', set, string.sub(pk, at + 1))
  if redis.call('ZCARD', set) == 0 then redis.call('ZREM', K_PARKED, scope) end
end

-- ---- status counters (the console's counts in O(1), without walking the records) ----
-- The hash `counts` holds, per stored status, how many records of the partition are counted
-- under it, plus `g`, the counting generation, and `ok` ('1' once every record is counted in
-- generation g). A record stores the generation it is counted in as its field `cg`
-- ('x': set aside as corrupt, counted by the `corrupt` index instead). A script that changes
-- a record's stored status moves its count (count_move); a record not yet counted in
-- generation g (written before the counters, or before a recount began) is counted on its
-- first change and marked, so a recount (counts/recount_page.lua) running beside the
-- writes counts every record exactly once. No generation (a namespace from before the
-- counters, never recounted): nothing is counted until status_counts starts a recount.
local K_COUNTS = P .. 'counts'
local COUNT_GEN = false

-- The counting generation (nil: none yet), read once per script.
function H.count_gen()
  if COUNT_GEN == false then COUNT_GEN = redis.call('HGET', K_COUNTS, 'g') or nil end
  return COUNT_GEN
end

-- Moves one record counted in generation `cg` (its stored `cg`, nil when none) from stored
-- status `from` to `to` (either nil: created, deleted). Returns the generation the record
-- must store as `cg` when that changes, else nil.
function H.count_add(status, n)
  if DEFER then
    DEFER.counts[status] = (DEFER.counts[status] or 0) + n
  else
    redis.call('HINCRBY', K_COUNTS, status, n)
  end
end

function H.count_move(cg, from, to)
  local g = H.count_gen()
  if g == nil or cg == 'x' then return nil end
  if cg == g and from then H.count_add(from, -1) end
  if to then H.count_add(to, 1) end
  if cg ~= g and to then return g end
  return nil
end

-- Orders a recount: the counters of every status are dropped and the generation moves on,
-- so no record counts until it changes or status_counts' recount reaches it. For a record
-- whose counted status cannot be known any more (claim.lua's count_set_aside).
function H.count_invalidate()
  local g = H.count_gen()
  if g == nil then return end
  COUNT_GEN = H.fmt(tonumber(g) + 1)
  -- Changes gathered so far were counted in the generation this drops.
  if DEFER then DEFER.counts = {} end
  redis.call('HDEL', K_COUNTS, 'admitted', 'running', 'suspended', 'completed', 'failed',
    'cancelled', 'dead', 'bad')
  redis.call('HSET', K_COUNTS, 'g', COUNT_GEN, 'ok', '0')
end

-- ---- admission order: ordered keys and browsing ----
-- Every new record takes the next value of the counter `seq` as its field `sq`, its place
-- in admission order. A keyed record is in its key's line, the zset `line:<key>` scored by
-- `sq`, while it is neither terminal nor dead (whether or not the key is ordered, so
-- ordering a key later finds its line complete): the first member is the only execution of
-- an ordered key a claim may take. Each record is also listed, scored by `sq`, in the zsets
-- `ls:<status>` of its stored status, and `ls:<status>\31w\31<workflow>`,
-- `ls:<status>\31k\31<key>`, `ls:<status>\31wk\31<workflow>\31<key>` when it has those
-- (a workflow name holds no control character): list_executions reads one of them, or
-- merges the seven statuses' ones, newest first.
function H.line_key(ck) return P .. 'line:' .. ck end

-- The browse sets a record of stored status `st`, workflow `wf` and key `ck` (nil: none)
-- is listed in.
function H.browse_sets(st, wf, ck)
  local base = P .. 'ls:' .. st
  local out = {base}
  if wf then out[#out + 1] = base .. '\31w\31' .. wf end
  if ck then out[#out + 1] = base .. '\31k\31' .. ck end
  if wf and ck then out[#out + 1] = base .. '\31wk\31' .. wf .. '\31' .. ck end
  return out
end

-- Moves record `id` (admission sequence `sq`, a number or nil for a record admitted before
-- the sequence existed: never listed) from the browse sets of stored status `from` to those
-- of `to` (either nil: none).
function H.browse_move(sq, id, wf, ck, from, to)
  if sq == nil then return end
  if from then
    for _, key in ipairs(H.browse_sets(from, wf, ck)) do H.zset_put(key, id, nil) end
  end
  if to then
    local score = H.fmt(sq)
    for _, key in ipairs(H.browse_sets(to, wf, ck)) do H.zset_put(key, id, score) end
  end
end

-- A new admitted execution's hash: ExecutionRecord::admitted, due at `due` (now, or the
-- admission's not_before), with priority `pr` (a number; 0 is not stored), concurrency
-- key `ck` ('' = none), W3C trace context `tc` ('' or nil = none) and admission sequence
-- `seq` (a decimal string the client reserved from the namespace's counter, on a split
-- namespace; '' or nil: the next of this prefix's counter).
function H.create_record(id, workflow, input, due, pr, ck, tc, seq)
  local fields = {'st', 'admitted', 'tk', '0', 'un', '0', 'es', '0', 'du', H.fmt(due)}
  local function add(name, value)
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  end
  if workflow ~= '' then add('wf', workflow) end
  if input ~= '' then add('in', input) end
  if pr ~= 0 then add('pr', H.fmt(pr)) end
  if ck ~= '' then add('ck', ck) end
  if tc ~= nil and tc ~= '' then add('tc', tc) end
  local sq = tonumber(seq or '')
  if not sq then sq = redis.call('INCR', P .. 'seq') end
  add('sq', H.fmt(sq))
  local g = H.count_move(nil, nil, 'admitted')
  if g then add('cg', g) end
  redis.call('HSET', H.k_exec(id), unpack(fields))
  local wf, key = nil, nil
  if workflow ~= '' then wf = workflow end
  if ck ~= '' then key = ck end
  H.browse_move(sq, id, wf, key, nil, 'admitted')
  if key then redis.call('ZADD', H.line_key(key), H.fmt(sq), id) end
end

-- A new admitted execution due at `due`: always in its level's ready set, scored by `due`
-- (no delivery yet, so no redelivery gate; a claim takes only members scored at or before
-- its now, so a scheduled execution is not claimable before its time).
function H.create(id, workflow, input, due, pr, ck, tc, seq)
  H.create_record(id, workflow, input, due, pr, ck, tc, seq)
  H.ready_add(pr, H.fmt(due), id)
end
