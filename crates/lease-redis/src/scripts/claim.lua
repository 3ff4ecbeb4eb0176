-- lease-redis: claiming due executions, shared by claim_due and acknowledge_and_claim.
--
-- A claim plans first, reading only (plan_claim), then checks the token counter
-- (counter_problem), then writes (apply_claim): a Lua error does not roll back, so every
-- refusal happens before the first write.
local MAX_TOKEN = 9007199254740991 -- 2^53 - 1: doubles are exact up to here
-- Tokens per cluster config epoch (a promoted replica issues above every token the old
-- primary issued, whatever replication lost): on a cluster a token is epoch * 2^36 + n, so
-- the 2^53 exact range holds epochs 0 ..= 2^17 - 1 of 2^36 - 1 tokens each.
local EPOCH_SPAN = 68719476736 -- 2^36
local MAX_EPOCH = 131071 -- 2^17 - 1

-- ---- validation of what the client decodes (a claim that issued a lease must
-- never fail afterwards, so the script refuses, as corrupt, a candidate the client could not
-- decode) ----

-- True when `s` is UTF-8 (no overlong forms, surrogates or code points past U+10FFFF);
-- with `names`, also 1-255 bytes with no control character (char::is_control: U+0000-001F,
-- U+007F-009F), the rule of every id and workflow name.
function H.utf8_ok(s, names)
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

function H.valid_name(s) return H.utf8_ok(s, true) end

-- The problem a failed pcall(load, ...) reports, as text without the script position.
function H.problem_of(e)
  local msg = e
  if type(e) == 'table' then msg = e.err or e.message or 'unreadable record' end
  msg = tostring(msg)
  local at = string.find(msg, 'LEASECORRUPT ', 1, true)
  if at then return string.sub(msg, at + 13) end
  return msg
end

-- What the client would fail to decode in the payload fields of execution `id` (workflow
-- name, input, outcome; those read with its record `r`, else read here), or nil. load()
-- has checked the state-machine fields.
function H.payload_problem(id, r)
  local v = r.pl or redis.call('HMGET', H.k_exec(id), 'wf', 'in', 'oc', 'ov')
  if v[1] and not H.valid_name(v[1]) then
    return 'workflow name is not 1-255 bytes of UTF-8 without control characters'
  end
  if v[2] and not H.utf8_ok(v[2], false) then return 'input is not UTF-8' end
  if v[3] or v[4] then
    if (v[3] ~= 'completed' and v[3] ~= 'failed' and v[3] ~= 'cancelled') or not v[4] then
      return 'outcome'
    end
    if not H.utf8_ok(v[4], false) then return 'outcome is not UTF-8' end
  end
  return nil
end

-- A candidate's record, or nil and the problem when it cannot be used.
function H.inspect(id)
  local ok, r = pcall(H.load, id, true)
  if not ok then return nil, H.problem_of(r) end
  if not H.valid_name(id) then
    return nil, 'execution id is not 1-255 bytes of UTF-8 without control characters'
  end
  if r and r.ck and not H.valid_name(r.ck) then
    return nil, 'concurrency key is not 1-255 bytes of UTF-8 without control characters'
  end
  return r, nil
end

-- Sorts `moved` members ({id, due, pr}) in claim order: priority descending, due, id.
function H.sort_claim_order(moved)
  table.sort(moved, function(a, b)
    if a.pr ~= b.pr then return a.pr > b.pr end
    if a.due ~= b.due then return a.due < b.due end
    return a.id < b.id
  end)
end

-- Plans moving the waiting members whose claimable instant passed at `now` (oldest first,
-- at most plan.budget) into their level's ready set, scored by their due time; appends the
-- moved ones that are due to `moved` ({id, due, pr, r}), for the merge.
function H.plan_moves(plan, now, moved)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_WAITING, '-inf', H.fmt(now), 'LIMIT', 0, plan.budget)) do
    plan.seen[id] = true
    local r, problem = H.inspect(id)
    if problem then
      plan.corrupt[#plan.corrupt + 1] = {id, problem}
    else
      local due, pr = nil, 0
      if r ~= nil then
        local _, d = H.claimable_at(r)
        due, pr = d, r.pr
      end
      plan.moves[#plan.moves + 1] = {id, due, pr}
      if due ~= nil and due <= now then moved[#moved + 1] = {id = id, due = due, pr = pr, r = r} end
    end
  end
end

-- ---- pauses: the set `paused` holds the paused scopes: workflow names,
-- and NS_SCOPE for the whole namespace (a control character no workflow name holds) ----
local NS_SCOPE = '\31namespace'

-- The paused scopes as {ns = bool, wf = {name = true}}, or nil when none is paused (the
-- common case: one SMEMBERS of an empty set, nothing else).
function H.paused_scopes()
  local m = redis.call('SMEMBERS', P .. 'paused')
  if #m == 0 then return nil end
  local s = {ns = false, wf = {}}
  for _, v in ipairs(m) do
    if v == NS_SCOPE then s.ns = true else s.wf[v] = true end
  end
  return s
end

-- The paused workflow of execution `id`, or nil when its workflow is not paused (the
-- namespace pause is not a workflow's).
function H.paused_workflow(paused, id)
  if paused == nil then return nil end
  local wf = redis.call('HGET', H.k_exec(id), 'wf')
  if wf and paused.wf[wf] then return wf end
  return nil
end

-- True when a paused scope of `paused` covers execution `id` (PauseScope::covers).
function H.held_back(paused, id)
  if paused == nil then return false end
  return paused.ns or H.paused_workflow(paused, id) ~= nil
end

-- An iterator over the members of level `pr`'s ready set due at or before `now` that the
-- plan has not seen, in (due, id) order, read in pages of limit + 1, each later page twice
-- the size of the one before (up to 1024: a walk past many parked members reads few pages).
function H.ready_members(plan, now, pr)
  local key = H.ready_key(pr)
  local offset, page, pi, done, n = 0, {}, 1, false, plan.limit + 1
  local function peek()
    while true do
      if pi > #page then
        if done then return nil end
        local raw = redis.call('ZRANGEBYSCORE', key, '-inf', H.fmt(now), 'WITHSCORES', 'LIMIT', offset, n)
        offset = offset + #raw / 2
        if #raw < 2 * n then done = true end
        n = math.min(n * 2, 1024)
        page = {}
        for i = 1, #raw, 2 do page[#page + 1] = {id = raw[i], due = tonumber(raw[i + 1]), pr = pr} end
        pi = 1
        if #page == 0 then return nil end
      end
      local m = page[pi]
      if not plan.seen[m.id] then return m end
      pi = pi + 1
    end
  end
  local function take() pi = pi + 1 end
  return peek, take
end

-- ---- concurrency limits: the hash `limits` maps a key to its limit and
-- DEFAULT_LIMIT (a control character first: no key holds one) to the namespace default ----
local DEFAULT_LIMIT = '\31default'

-- ---- ordered keys and start rates (lease_core::keyed): the hash `ordered` holds the
-- ordered keys (and DEFAULT_LIMIT when every key is), the hash `rates` maps a key (or
-- DEFAULT_LIMIT) to its rate '<starts>:<period ms>'; `starts:<key>` is a zset of the key's
-- claim instants (member the lease's token, score the claim's instant), written only while
-- a rate applies to the key (the set `rated` names the keys that have one) and pruned to
-- its window by each claim that reads it ----
local K_ORDERED = P .. 'ordered'
local K_RATES = P .. 'rates'

function H.starts_key(ck) return P .. 'starts:' .. ck end

-- Whether any key is ordered or rated, read once per claim at its first keyed candidate
-- (one EXISTS when neither is in use, so a claim without them costs what it did).
function H.key_policies(plan)
  if plan.pol == nil then
    plan.pol = {}
    if redis.call('EXISTS', K_ORDERED, K_RATES) > 0 then
      plan.pol.ordered = redis.call('EXISTS', K_ORDERED) == 1
      plan.pol.rated = redis.call('EXISTS', K_RATES) == 1
    end
  end
  return plan.pol
end

-- The rate of key `ck` ({starts, period}), or nil when none applies.
function H.key_rate(ck)
  local v = redis.call('HMGET', K_RATES, ck, DEFAULT_LIMIT)
  local raw = v[1] or v[2]
  if not raw then return nil end
  local starts, period = string.match(raw, '^(%d+):(%d+)$')
  if not starts then H.corrupt('rate limit of ' .. ck) end
  return {starts = tonumber(starts), period = tonumber(period)}
end

-- The gate of concurrency key `ck` at the plan's instant, read once per claim:
-- {limit (nil = unlimited), held = its live leases (expiring after now) plus this claim's,
-- ordered, rate (nil = none) with recent = its claims in the window (including this
-- claim's, `taken`)}.
function H.key_gate(plan, ck)
  local g = plan.keys[ck]
  if g then return g end
  local v = redis.call('HMGET', P .. 'limits', ck, DEFAULT_LIMIT)
  local raw = v[1] or v[2]
  g = {held = 0}
  if raw then
    g.limit = tonumber(raw)
    if not g.limit then H.corrupt('concurrency limit of ' .. ck) end
  end
  local pol = H.key_policies(plan)
  if pol.ordered then
    local o = redis.call('HMGET', K_ORDERED, ck, DEFAULT_LIMIT)
    g.ordered = (o[1] or o[2]) ~= false
  end
  if pol.rated then
    g.rate = H.key_rate(ck)
    if g.rate then
      g.floor = plan.now - g.rate.period
      g.stored = redis.call('ZCOUNT', H.starts_key(ck), '(' .. H.fmt(g.floor), '+inf')
      g.taken = 0
      g.recent = g.stored
      plan.rated[#plan.rated + 1] = ck
    end
  end
  if g.limit or g.ordered then
    g.held = redis.call('ZCOUNT', H.live_key(ck), '(' .. H.fmt(plan.now), '+inf')
  end
  plan.keys[ck] = g
  return g
end

-- The first execution of key `ck`'s line that is neither terminal nor dead at the plan's
-- instant (members that are, or that do not load, are skipped and taken out of the line
-- by the claim's writes), or false when there is none among its first 16; read once per
-- claim.
local LINE_SCAN = 16
-- The head of a line whose first LINE_SCAN members all ended: no execution id is empty.
local LINE_BLOCKED = ''
function H.line_head(plan, g, ck)
  if g.head ~= nil then return g.head end
  g.head = false
  local ids = redis.call('ZRANGE', H.line_key(ck), 0, LINE_SCAN - 1)
  for _, id in ipairs(ids) do
    local ok, r = pcall(H.load, id)
    if ok and r ~= nil and not H.terminal(H.effective(r, plan.now).st) then
      g.head = id
      return id
    end
    if not ok or r == nil or H.terminal(r.st) then plan.unline[#plan.unline + 1] = {ck, id} end
  end
  -- A full scan without one: the first lies further on (a later claim gets there once these
  -- leave the line); none of the key goes meanwhile.
  if #ids == LINE_SCAN then g.head = LINE_BLOCKED end
  return g.head
end

-- The instant key `ck`'s rate lets it start again after the claims recorded and this
-- claim's (RateLimit::next_start), or nil when it may start now.
function H.rate_next(plan, g, ck)
  local n = g.recent - g.rate.starts
  if n < 0 then return nil end
  -- The window's claims in ascending order: the recorded ones up to now, this claim's (at
  -- now), the recorded ones after now (a caller's earlier clock); the (n+1)-th leaves last.
  local key = H.starts_key(ck)
  local upto = redis.call('ZCOUNT', key, '(' .. H.fmt(g.floor), H.fmt(plan.now))
  local at = plan.now
  if n < upto or n >= upto + g.taken then
    local i = n
    if n >= upto then i = n - g.taken end
    local m = redis.call('ZRANGEBYSCORE', key, '(' .. H.fmt(g.floor), '+inf', 'WITHSCORES', 'LIMIT', i, 1)
    if #m == 0 then return nil end
    at = tonumber(m[2])
  end
  return at + g.rate.period
end

-- True when record `r` ({ck, id}) is held back by its concurrency key (lease_core::selection
-- rule 3 and lease_core::keyed): the key at its limit or its rate, or ordered with a live
-- lease or another execution first in its line.
function H.key_full(plan, r)
  if not r.ck then return false end
  local g = H.key_gate(plan, r.ck)
  if g.limit ~= nil and g.held >= g.limit then return true end
  if g.rate and g.recent >= g.rate.starts then return true end
  if g.ordered then
    if g.held > 0 then return true end
    local head = H.line_head(plan, g, r.ck)
    return head ~= false and head ~= r.id
  end
  return false
end

-- ---- parking (see ops.lua): a held-back member is parked once, not examined by every
-- claim; open scopes give their members back, bounded per call ----

-- Members one claim parks at most; past that, held-back members count against the
-- examination budget as before (a backlog admitted before its gate closed is parked over
-- ceil(n / PARK_BUDGET) claims, each returning the work it reached).
local PARK_BUDGET = 1000
-- Open scopes one claim looks at at most (the others stay due: the horizon says now).
local SCOPES_PER_CLAIM = 16

-- The first instant after the plan's at which a live lease of key `ck` expires (a place
-- frees), or PARK_NEVER when it holds none.
function H.next_key_expiry(plan, ck)
  local m = redis.call('ZRANGEBYSCORE', H.live_key(ck), '(' .. H.fmt(plan.now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #m == 0 then return PARK_NEVER end
  return tonumber(m[2])
end

-- The earliest instant key `ck`'s gates may let its next execution go, as the plan leaves
-- them (its own leases counted): PARK_NOW when open; each closed gate opens no earlier
-- than its instant (a limit or an ordered key's live lease: the next lease expiry; a rate:
-- its next start), the key when all have; an ordered key whose first execution is not
-- held back waits for that one to be claimed or leave the line (events that schedule the
-- key, see key_may_open in record.lua): PARK_NEVER.
function H.key_open_at(plan, ck)
  local g = H.key_gate(plan, ck)
  local at = PARK_NOW
  if (g.limit ~= nil and g.held >= g.limit) or (g.ordered and g.held > 0) then
    at = math.max(at, H.next_key_expiry(plan, ck))
  end
  if g.rate then at = math.max(at, H.rate_next(plan, g, ck) or PARK_NOW) end
  if g.ordered and g.held == 0 and at == PARK_NOW then
    local head = H.line_head(plan, g, ck)
    if head then
      local pk = redis.call('HGET', H.k_exec(head), 'pk')
      if not (pk and string.sub(pk, 1, #ck + 3) == 'k:' .. ck .. '\31') then at = PARK_NEVER end
    end
  end
  return at
end

-- The parked member of key `ck`'s first execution, when it is parked under the key.
function H.parked_head(plan, g, ck)
  local head = H.line_head(plan, g, ck)
  if not head then return nil end
  local pk = redis.call('HGET', H.k_exec(head), 'pk')
  local prefix = 'k:' .. ck .. '\31'
  if pk and string.sub(pk, 1, #prefix) == prefix then return string.sub(pk, #prefix + 1) end
  return nil
end

-- How many members of parked `scope` the claim may bring back (math.huge: all; 'head': an
-- ordered key's first execution only), and when none, the instant to look at it again: a
-- paused workflow never by time; a key at its limit at its next lease expiry; a key with a
-- rate or an order when key_open_at says ('gate': judged again after the claim).
function H.scope_room(plan, scope)
  local name = string.sub(scope, 3)
  if string.sub(scope, 1, 2) == 'w:' then
    if plan.paused and plan.paused.wf[name] then return 0, PARK_NEVER end
    return math.huge, nil
  end
  local g = H.key_gate(plan, name)
  if g.ordered or g.rate then
    if H.key_open_at(plan, name) ~= PARK_NOW then return 0, 'gate' end
    if g.ordered then return 'head', 'gate' end
    local room = g.rate.starts - g.recent
    if g.limit then room = math.min(room, g.limit - g.held) end
    return room, 'gate'
  end
  if g.limit == nil then return math.huge, nil end
  local room = g.limit - g.held
  if room > 0 then return room, H.next_key_expiry(plan, name) end
  return 0, H.next_key_expiry(plan, name)
end

-- Plans bringing back the parked members of the scopes due at `now` (at most
-- SCOPES_PER_CLAIM scopes and plan.budget members; per key no more than its free places),
-- first in claim order, into their ready sets; appends them to `moved` ({id, due, pr,
-- scope}) for the merge, and records in plan.rescore when each scope is due again.
function H.plan_unparks(plan, now, moved)
  local left = plan.budget
  for _, scope in ipairs(redis.call('ZRANGEBYSCORE', K_PARKED, '-inf', H.fmt(now), 'LIMIT', 0, SCOPES_PER_CLAIM)) do
    local room, again = H.scope_room(plan, scope)
    local members = {}
    if room == 'head' then
      local name = string.sub(scope, 3)
      room = 0
      if left > 0 then members = {H.parked_head(plan, H.key_gate(plan, name), name)} end
    end
    local n = math.min(room, left)
    if n > 0 then members = redis.call('ZRANGE', H.parked_set(scope), 0, n - 1) end
    for _, m in ipairs(members) do
      local pr, due, id = H.park_decode(m)
      plan.unparks[#plan.unparks + 1] = {scope, m, pr, due, id}
      moved[#moved + 1] = {id = id, due = due, pr = pr, scope = scope}
    end
    left = left - #members
    -- Emptied: the scope goes (apply_unparks). Every free place given a member (or none
    -- free): due again at `again` (an ended lease or a member leaving unclaimed lowers it,
    -- see key_may_open in record.lua). Cut short by the budget: left due.
    if again == 'gate' then plan.rescore[scope] = 'gate'
    elseif #members < n then plan.rescore[scope] = PARK_NOW
    elseif n >= room then plan.rescore[scope] = again end
  end
end

-- Plans parking the held-back candidate `pick` (record `r`) under `scope`: true when it
-- is parked, false when this claim's PARK_BUDGET is spent (or its due time, stored by
-- another program, lies outside what a member encodes).
function H.plan_park(plan, pick, r, scope)
  if plan.park_left == 0 or math.abs(pick.due) > PARK_DUE_BIAS then return false end
  plan.park_left = plan.park_left - 1
  plan.parks[#plan.parks + 1] = {id = pick.id, level = pick.pr, scope = scope,
    member = H.park_member(r.pr, pick.due, pick.id)}
  return true
end

-- When a claim should look at `scope` again after parking members there: a workflow (paused)
-- only on resume, a key at its next lease expiry (this claim's own leases of the key lower
-- it as they are placed).
function H.park_due(plan, scope)
  if string.sub(scope, 1, 2) == 'w:' then return PARK_NEVER end
  local g = H.key_gate(plan, string.sub(scope, 3))
  if g.ordered or g.rate then return H.key_open_at(plan, string.sub(scope, 3)) end
  return H.next_key_expiry(plan, string.sub(scope, 3))
end

-- Writes the plan's unparks (before the candidates are judged by later writes) and
-- when each scope looked at is due again.
function H.apply_unparks(plan)
  for _, u in ipairs(plan.unparks) do
    redis.call('ZREM', H.parked_set(u[1]), u[2])
    redis.call('HDEL', H.k_exec(u[5]), 'pk')
    H.ready_add(u[3], H.fmt(u[4]), u[5])
  end
  for scope, at in pairs(plan.rescore) do
    if at == 'gate' then at = H.key_open_at(plan, string.sub(scope, 3)) end
    if redis.call('ZCARD', H.parked_set(scope)) == 0 then
      redis.call('ZREM', K_PARKED, scope)
    else
      redis.call('ZADD', K_PARKED, H.fmt(at), scope)
    end
  end
end

-- Writes the plan's parks: out of the ready set, into the scope's parked set, the entry
-- named on the record, the scope listed (or due earlier) at park_due.
function H.apply_parks(plan)
  local due = {}
  for _, p in ipairs(plan.parks) do
    H.ready_rem(p.level, p.id)
    redis.call('ZADD', H.parked_set(p.scope), 0, p.member)
    redis.call('HSET', H.k_exec(p.id), 'pk', p.scope .. '\31' .. p.member)
    if due[p.scope] == nil then
      due[p.scope] = H.park_due(plan, p.scope)
      H.park_schedule(p.scope, due[p.scope], true)
    end
  end
end

-- Judges one candidate `pick` ({id, due, pr, r?, scope?}; `r` already loaded for a member
-- moved from waiting, `pr` the level of the ready set it is read from or joins, `scope` the
-- parked scope it was brought back from): a claim candidate, one held back by a pause or
-- its key's limit (parked), a corrupt record, a stale ready member or an index entry to
-- repair. True when the candidate was parked (which costs the examination budget nothing).
function H.plan_candidate(plan, pick, now)
  local id = pick.id
  plan.seen[id] = true
  local r, problem = pick.r, nil
  if r == nil then r, problem = H.inspect(id) end
  if problem then
    plan.corrupt[#plan.corrupt + 1] = {id, problem, pick.pr}
  elseif r == nil then
    plan.stale[#plan.stale + 1] = {id, pick.pr}
  else
    local e = H.effective(r, now)
    if not H.claimable(e, now) then
      plan.replace[#plan.replace + 1] = r
    else
      local wf = H.paused_workflow(plan.paused, id)
      if wf then return H.plan_park(plan, pick, r, 'w:' .. wf) end
      problem = H.payload_problem(id, r)
      if problem then
        plan.corrupt[#plan.corrupt + 1] = {id, problem, pick.pr}
      elseif H.key_full(plan, r) then
        plan.blocked[id] = true
        plan.nblocked = plan.nblocked + 1
        if H.plan_park(plan, pick, r, 'k:' .. r.ck) then return true end
        -- Not parked: the horizon counts the key's opening instead of its scope's.
        plan.gate_next = H.min_opt(plan.gate_next, H.key_open_at(plan, r.ck))
        return false
      else
        if r.ck then
          local g = plan.keys[r.ck]
          g.held = g.held + 1
          if g.rate then
            g.recent = g.recent + 1
            g.taken = g.taken + 1
          end
        end
        plan.cands[#plan.cands + 1] = {id = id, r = r, e = e, due = pick.due}
        return false
      end
    end
  end
  -- A member brought back for a free place that is not a candidate leaves the place free.
  if pick.scope then plan.rescore[pick.scope] = PARK_NOW end
  return false
end

-- Whether any of the keys only pauses, priorities, parking and attempt limits fill holds
-- members (`paused`, `levels`, `parked`, `running_last`): when none does (a plain drain),
-- one EXISTS stands for the four reads that would each find an empty key.
function H.claim_extras()
  return redis.call('EXISTS', P .. 'paused', P .. 'levels', K_PARKED, K_RUNNING_LAST) > 0
end

-- The priority levels a claim walks, highest first: level 0, those listed in `levels` (read
-- only when claim_extras found one of its keys: `levels` is empty when only the default is
-- in use) and those of `moved` members.
function H.claim_levels(moved, extras)
  local seen, out = {[0] = true}, {0}
  local function add(pr)
    if not seen[pr] then
      seen[pr] = true
      out[#out + 1] = pr
    end
  end
  if extras then
    for _, l in ipairs(redis.call('ZRANGE', P .. 'levels', 0, -1)) do add(tonumber(l) or 0) end
  end
  for _, m in ipairs(moved) do add(m.pr) end
  table.sort(out, function(a, b) return a > b end)
  return out
end

-- Walks the plan's levels, each merging its ready set with the `moved` members of that
-- level in (due, id) order, judging candidates until `limit` are found or `limit +
-- plan.budget` were examined (parked ones not counted).
function H.plan_walk(plan, now, limit, moved)
  local mi, examined = 1, 0
  for _, level in ipairs(plan.levels) do
    local peek, take = H.ready_members(plan, now, level)
    while #plan.cands < limit and examined < limit + plan.budget do
      local rm = peek()
      local mm = moved[mi]
      if mm and mm.pr ~= level then mm = nil end
      local pick
      if rm and (not mm or rm.due < mm.due or (rm.due == mm.due and rm.id < mm.id)) then
        take()
        pick = rm
      elseif mm then
        mi = mi + 1
        pick = mm
      else
        break
      end
      if not H.plan_candidate(plan, pick, now) then examined = examined + 1 end
    end
  end
end

-- claim_due's plan at `now` for up to `limit` leases, reading only: the waiting->ready
-- moves, the parked members brought back, corrupt records, stale ready members, index
-- repairs, the held-back members to park and the candidates in claim order
-- (lease_core::selection: priority descending, then due_at, then id; paused executions and
-- keys at their limit skipped). Bounded work per call, so no script blocks the server for
-- long whatever the backlog: at most max(limit * 4,
-- 100) waiting->ready moves, as many parked members brought back, limit + as many ready
-- members examined besides at most PARK_BUDGET parked; what is left is handled by the next
-- call (the horizon then reports "now": a member at or before now remains in a ready set
-- or waiting, or a scope stays due).
function H.plan_claim(now, limit)
  local plan = {now = now, limit = limit, budget = math.max(limit * 4, 100), seen = {},
    corrupt = {}, moves = {}, stale = {}, replace = {}, cands = {}, base = 0,
    keys = {}, blocked = {}, nblocked = 0, levels = {0}, extras = H.claim_extras(),
    unparks = {}, rescore = {}, parks = {}, park_left = PARK_BUDGET, unline = {}, rated = {}}
  if plan.extras then
    plan.paused = H.paused_scopes()
    if plan.paused and plan.paused.ns then return plan end
  end
  local moved = {}
  H.plan_moves(plan, now, moved)
  if plan.extras then H.plan_unparks(plan, now, moved) end
  H.sort_claim_order(moved)
  plan.levels = H.claim_levels(moved, plan.extras)
  H.plan_walk(plan, now, limit, moved)
  return plan
end

-- The token counter under prefix `P` (`token`): its value (0 when unset), or nil and the
-- reason it holds no token.
function H.read_counter()
  local raw = redis.call('GET', P .. 'token')
  if not raw then return 0, nil end
  if not (raw == '0' or string.match(raw, '^[1-9]%d*$')) or #raw > 16 then
    return nil, 'the counter holds ' .. string.format('%q', string.sub(raw, 1, 40)) .. ', not a token'
  end
  return tonumber(raw), nil
end

-- The config epoch of this cluster node (`cluster_my_epoch` of `CLUSTER INFO`: the primary's
-- configEpoch, which every promotion raises above the old primary's), or nil on a server
-- without cluster support (`CLUSTER INFO` is an error there). Read here, never taken from a
-- client (a client's view of the cluster can be stale after a failover).
function H.config_epoch()
  local info = redis.pcall('CLUSTER', 'INFO')
  if type(info) ~= 'string' then return nil end
  return tonumber(string.match(info, 'cluster_my_epoch:(%d+)'))
end

-- The next `n` tokens of the counter under prefix `P`: `base` such that they are
-- base + 1 ..= base + n, or nil and why none can be issued. On a cluster node of config
-- epoch E the tokens lie at or above E * 2^36 + 1 (a counter behind jumps there) and within
-- the epoch range of their first one, so a promoted replica (a higher E) issues above every
-- token its old primary issued, whatever replication lost. A server without cluster support
-- (one primary, no automatic failover) counts on up to 2^53 - 1 as before.
function H.next_tokens(n)
  local base, problem = H.read_counter()
  if problem then return nil, problem end
  local last = MAX_TOKEN
  local epoch = H.config_epoch()
  if epoch then
    if epoch > MAX_EPOCH then
      return nil, 'cluster config epoch ' .. H.fmt(epoch) .. ' is above ' .. MAX_EPOCH .. ', the last one tokens below 2^53 can carry'
    end
    base = math.max(base, epoch * EPOCH_SPAN)
    last = math.min((math.floor(base / EPOCH_SPAN) + 1) * EPOCH_SPAN - 1, MAX_TOKEN)
  end
  if base + n <= last then return base, nil end
  if last == MAX_TOKEN then
    return nil, 'the next ' .. n .. ' tokens after ' .. H.fmt(base) .. ' would pass 2^53 - 1, the last token this backend issues exactly'
  end
  return nil, 'the next ' .. n .. ' tokens after ' .. H.fmt(base) .. ' would pass ' .. H.fmt(last) .. ', the end of config epoch ' .. H.fmt(math.floor(base / EPOCH_SPAN)) .. "'s tokens (a CLUSTER FAILOVER on this shard's replica raises the epoch)"
end

-- Takes the `n` tokens after `base` (from next_tokens): the counter becomes base + n.
function H.take_tokens(base, n)
  redis.call('SET', P .. 'token', H.fmt(base + n))
end

-- Why token `t` cannot go to candidate `c` (not above its stored token), or nil.
function H.token_problem(t, c)
  if t <= c.r.tk then
    return 'next token ' .. H.fmt(t) .. ' is not above token ' .. H.fmt(c.r.tk) .. ' of execution ' .. c.id .. ' (set the counter above the highest stored token)'
  end
  return nil
end

-- The token counter check, before any write (so a refusal changes nothing): nil when the
-- counter can issue the
-- plan's tokens (next_tokens: base + 1 ..= base + n, each above its candidate's stored
-- token; sets plan.base), else the reason it cannot (LeaseError::TokenCounter).
-- With `tokens` (a partition of a split namespace: the namespace's counter lies
-- under the home prefix, in another slot, so the client reserved them there with
-- claim_split/reserve_tokens.lua) the i-th candidate gets tokens[i] instead (plan.tokens).
function H.counter_problem(plan, tokens)
  if #plan.cands == 0 then return nil end
  if tokens then
    for i, c in ipairs(plan.cands) do
      local problem = H.token_problem(tokens[i], c)
      if problem then return problem end
    end
    plan.tokens = tokens
    return nil
  end
  local base, problem = H.next_tokens(#plan.cands)
  if problem then return problem end
  for i, c in ipairs(plan.cands) do
    problem = H.token_problem(base + i, c)
    if problem then return problem end
  end
  plan.base = base
  return nil
end

-- Takes record `id`, set aside as corrupt, out of the status counters: counted
-- in the current generation under a stored status, that count goes; when the status it was
-- counted under cannot be read back (another program rewrote `st`, or the key is no longer
-- a hash) a recount is ordered (count_invalidate). The record is marked `cg` = 'x': the
-- `corrupt` index counts it from now on.
function H.count_set_aside(id)
  local g = H.count_gen()
  if g == nil then return end
  local v = redis.pcall('HMGET', H.k_exec(id), 'st', 'cg')
  if v.err then return H.count_invalidate() end
  if v[2] == 'x' then return end
  if v[2] == g then
    if STATUSES[v[1]] then redis.call('HINCRBY', K_COUNTS, v[1], -1) else H.count_invalidate() end
  end
  if v[1] or v[2] then redis.call('HSET', H.k_exec(id), 'cg', 'x') end
end

-- Takes record `id`, set aside as corrupt, out of its key's line and the browse sets, as
-- far as its fields can be read: a corrupt record never holds an ordered key back.
function H.unlist_set_aside(id)
  local v = redis.pcall('HMGET', H.k_exec(id), 'st', 'wf', 'ck', 'sq')
  if v.err then return end
  if v[3] then redis.call('ZREM', H.line_key(v[3]), id) end
  if STATUSES[v[1]] then H.browse_move(tonumber(v[4]), id, v[2] or nil, v[3] or nil, v[1], nil) end
end

-- Writes the plan's index changes: waiting->ready moves, parked members brought back,
-- corrupt records out of every index into the corrupt list, stale ready members out, wrong
-- index entries repaired, held-back members parked.
function H.apply_index_changes(plan)
  for _, m in ipairs(plan.moves) do
    redis.call('ZREM', K_WAITING, m[1])
    if m[2] ~= nil then H.ready_add(m[3], H.fmt(m[2]), m[1]) end
  end
  H.apply_unparks(plan)
  for _, c in ipairs(plan.corrupt) do
    redis.call('ZREM', K_READY, c[1])
    if c[3] then H.ready_rem(c[3], c[1]) end
    redis.call('ZREM', K_WAITING, c[1])
    redis.call('ZREM', K_RUNNING, c[1])
    redis.call('ZREM', K_RUNNING_ES, c[1])
    redis.call('ZREM', K_FAILING, c[1])
    H.unlist_set_aside(c[1])
    H.count_set_aside(c[1])
    redis.call('ZADD', K_CORRUPT, 0, c[1])
    redis.call('HSET', K_CORRUPT_WHY, c[1], c[2])
  end
  for _, m in ipairs(plan.stale) do H.ready_rem(m[2], m[1]) end
  for _, m in ipairs(plan.unline) do redis.call('ZREM', H.line_key(m[1]), m[2]) end
  for _, ck in ipairs(plan.rated) do
    redis.call('ZREMRANGEBYSCORE', H.starts_key(ck), '-inf', H.fmt(plan.keys[ck].floor))
  end
  for _, r in ipairs(plan.replace) do H.reindex(r) end
  H.apply_parks(plan)
  -- running_last is empty when the plan found none of its keys (claim_extras) and no
  -- repair wrote since.
  if plan.extras or #plan.replace > 0 then H.bury_expired(plan.now, plan.budget) end
end

-- The partition's takeover counter (`takeovers`, a string, INCRBY; status_counts reads it
-- beside `counts`, summing the partitions): claims that took over a lease that ran out
-- unacknowledged. A key of its own, not a field of `counts`, so deleting `counts` to force
-- a recount never lowers it; written only by a claim that took over at least one lease, so
-- the drain's claims write nothing more.
local K_TAKEOVERS = P .. 'takeovers'

-- Writes the lease of candidate `c`, the plan's i-th, of `lease_ms`: its record, indexes
-- and (a rated key) the key's start. Returns the record as written.
function H.lease_candidate(plan, i, c, lease_ms)
  local e = c.e
  if e == c.r then e = H.copy(c.r) end
  e.tk = plan.tokens and plan.tokens[i] or plan.base + i
  e.st = 'running'
  e.le = plan.now + lease_ms
  e.ca = plan.now
  e.wk = nil
  e.al = H.attempt_limit_for(e.wf)
  e.rp = H.redelivery_for(e.wf)
  H.save(e, c.r)
  H.place(e, c.r)
  local g = e.ck and plan.keys[e.ck]
  if g and g.rate then
    redis.call('ZADD', H.starts_key(e.ck), H.fmt(plan.now), H.fmt(e.tk))
    redis.call('SADD', P .. 'rated', e.ck)
  end
  return e
end

-- Writes the checked plan: index changes, then a lease of `lease_ms` for each candidate with
-- tokens plan.base + 1, plan.base + 2, ... Returns the reply items (id, token, expires_at
-- and, with `with_records`, the HGETALL taken right after the claim, per lease) and the
-- earliest claimable instant of the new leases (what the claim publishes). A candidate
-- stored running is a lease that ran out (a takeover): their number goes to `takeovers`.
-- The leases' index, browse-set and counter writes go out once per set (deferred): no step
-- of the loop reads those sets.
function H.apply_claim(plan, lease_ms, with_records)
  H.apply_index_changes(plan)
  local out = {}
  local earliest = nil
  local takeovers = 0
  local n = #plan.cands
  if n > 0 and not plan.tokens then H.take_tokens(plan.base, n) end
  H.deferred(function()
    for i, c in ipairs(plan.cands) do
      if c.r.st == 'running' then takeovers = takeovers + 1 end
      local e = H.lease_candidate(plan, i, c, lease_ms)
      out[#out + 1] = c.id
      out[#out + 1] = H.fmt(e.tk)
      out[#out + 1] = H.fmt(e.le)
      if with_records then out[#out + 1] = redis.call('HGETALL', H.k_exec(c.id)) end
      earliest = H.min_opt(earliest, (H.claimable_at(e)))
    end
  end)
  if takeovers > 0 then redis.call('INCRBY', K_TAKEOVERS, takeovers) end
  return out, earliest
end

-- Appends the plan's corrupt records to the reply items as one last element
-- {'corrupt', id1, problem1, ...} (the client logs them), when there are any.
function H.report_corrupt(plan, out)
  if #plan.corrupt == 0 then return end
  local report = {'corrupt'}
  for _, c in ipairs(plan.corrupt) do
    report[#report + 1] = c[1]
    report[#report + 1] = c[2]
  end
  out[#out + 1] = report
end

-- True when the horizon leaves member `id` of a ready set or waiting, scored `score`, out
-- (lease_core::selection rule 4): a paused scope covers it or the claim skipped it for its
-- key; while the claim took fewer than its limit (it would have judged every due member it
-- did not reach), also a due member whose key is at its limit.
function H.gated_out(plan, id, score)
  if H.held_back(plan.paused, id) or plan.blocked[id] then return true end
  if plan.nblocked == 0 or score > plan.now or #plan.cands >= plan.limit then return false end
  local ck = redis.call('HGET', H.k_exec(id), 'ck')
  if ck == false or ck == nil or not H.key_full(plan, {ck = ck, id = id}) then return false end
  plan.gate_next = H.min_opt(plan.gate_next, H.key_open_at(plan, ck))
  return true
end

-- The first score in `key` of a member the gates do not hold back (gated_out). Bounded:
-- after HORIZON_SCAN members all held back, the last score read (a lower bound of every
-- later member's).
local HORIZON_SCAN = 1000
function H.first_open(key, plan)
  local offset, last = 0, nil
  while offset < HORIZON_SCAN do
    local m = redis.call('ZRANGE', key, offset, offset + 99, 'WITHSCORES')
    if #m == 0 then return nil end
    for i = 1, #m, 2 do
      last = tonumber(m[i + 1])
      if not H.gated_out(plan, m[i], last) then return last end
    end
    offset = offset + #m / 2
  end
  return last
end

-- The earliest instant a parked scope may open (PARK_NOW read as `now`), or nil when
-- none is listed but paused workflows: what parking holds back counts from its gate's
-- opening, which is never later than its members' claimable instant.
function H.parked_horizon(now)
  local m = redis.call('ZRANGE', K_PARKED, 0, 0, 'WITHSCORES')
  if #m == 0 then return nil end
  local at = tonumber(m[2])
  if at >= PARK_NEVER then return nil end
  return math.max(at, now)
end

-- The reply items preceded by {now, next}: `next` the earliest claimable instant left in
-- the namespace ('' = none). Every member's score is never later than its claimable_at
-- (see slots), and an execution with a claimable instant is in a ready set or waiting (a
-- running one too, scored from its lease expiry), so the first score of each set bounds it
-- from below; a member of either still at or before now (work this call's bounds left) is
-- claimable now. With gates (a pause, a key at its limit) the sets are walked past what
-- they hold back (first_open); with none, one ZRANGE per set. Parked members count from
-- their scope's instant (parked_horizon).
function H.with_horizon(now, out, plan)
  local gated = plan.paused ~= nil or plan.nblocked > 0
  local function first(key)
    if gated then return H.first_open(key, plan) end
    local m = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #m == 0 then return nil end
    return tonumber(m[2])
  end
  local next_at = nil
  if not (plan.paused and plan.paused.ns) then
    next_at = first(K_WAITING)
    for _, level in ipairs(plan.levels) do next_at = H.min_opt(next_at, first(H.ready_key(level))) end
    -- Only parks fill `parked` when claim_extras found it empty.
    if plan.extras or #plan.parks > 0 then next_at = H.min_opt(next_at, H.parked_horizon(now)) end
    -- What a closed key held back unparked opens at its key's instant (key_open_at).
    if plan.gate_next and plan.gate_next < PARK_NEVER then
      next_at = H.min_opt(next_at, math.max(plan.gate_next, now))
    end
  end
  local reply = {H.fmt(now), next_at and H.fmt(next_at) or ''}
  for i = 1, #out do reply[i + 2] = out[i] end
  return reply
end

-- claim_due evaluated at `now` (already min(caller's now, clock)) for up to `limit` leases
-- of `lease_ms`: plan, counter check, writes. Returns the reply items (each record with
-- `records`, preceded by the horizon with `horizon`) and the instant to publish; or nil, nil
-- and the token counter problem, with nothing written.
function H.claim(now, limit, lease_ms, records, horizon, tokens)
  local plan = H.plan_claim(now, limit)
  local problem = H.counter_problem(plan, tokens)
  if problem then return nil, nil, problem end
  local out, earliest = H.apply_claim(plan, lease_ms, records)
  H.report_corrupt(plan, out)
  if horizon then out = H.with_horizon(now, out, plan) end
  return out, earliest, nil
end

-- What a claim at `now` of up to `limit` leases would take, claiming nothing (on a split
-- namespace the client merges the partitions' candidates in claim order first): the plan's index
-- changes are written (waiting->ready moves, corrupt records out, repairs: what any claim
-- writes first), then the reply {now, next, due1, id1, priority1, due2, ...} as the horizon
-- reply of `claim`, each candidate with its due time and priority, and the corrupt report.
function H.peek_claim(now, limit)
  local plan = H.plan_claim(now, limit)
  H.apply_index_changes(plan)
  local out = {}
  for _, c in ipairs(plan.cands) do
    out[#out + 1] = H.fmt(c.due)
    out[#out + 1] = c.id
    out[#out + 1] = H.fmt(c.r.pr)
  end
  H.report_corrupt(plan, out)
  return H.with_horizon(now, out, plan)
end

-- min(caller's now, clock): ARGV-style `requested` ('' = the clock's).
function H.claim_now(clock, requested)
  if requested ~= nil and requested ~= '' then
    local t = tonumber(requested)
    if t < clock then return t end
  end
  return clock
end
