-- purge_terminal(before, limit): removes up to `limit` terminal executions whose last
-- delivery ended before `before`, each with its step records, the store receipts it made
-- (found through `rcpt:<id>`), the start record naming it (through `start_of`) and its
-- effects and store-waiter registrations (forget_effects in scripts/effect.lua).
-- ARGV[3] before ms, ARGV[4] limit, ARGV[5] split ('1': a partition of a split namespace,
-- whose home prefix holds the receipts, start records and effects: each removed id is
-- also added to the set `purged`, which the client empties once forget_at_home.lua has
-- removed what the home prefix holds about it; so a purge interrupted in between is
-- finished by the next one).
-- Reply: {id1, id2, ...} the executions removed (the client sorts them by id).
--
-- Which ones: the earliest ended first (`done` is scored by last_delivery_ended_at), so
-- repeated calls remove everything older than `before`. Each `done` member is re-checked on
-- its record: only a completed, failed or cancelled record whose end lies before `before` is removed;
-- a member whose record is gone or not terminal is a stale index entry and leaves `done`,
-- one whose end does not match its score is re-scored (never removed). The script plans
-- (reads only), then writes.
H.check_key_types()
local split = ARGV[5] == '1'
if split then H.check_key_type(P .. 'purged', 'set') end
local K_DONE = P .. 'done'
local K_STARTS = P .. 'starts'
local K_START_OF = P .. 'start_of'
for _, key in ipairs({K_STARTS, K_START_OF}) do
  local t = redis.call('TYPE', key)
  t = t.ok or t
  if t ~= 'hash' and t ~= 'none' then
    error({err = 'WRONGTYPE ' .. key .. ' holds a ' .. t .. ', expected a hash'})
  end
end
local before = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])

-- The end of a terminal record's last delivery, or nil when `id` is not a terminal record
-- with a readable end.
local function terminal_end(id)
  local v = redis.call('HMGET', H.k_exec(id), 'st', 'ld')
  if v[1] ~= 'completed' and v[1] ~= 'failed' and v[1] ~= 'cancelled' then return nil end
  if not v[2] or #v[2] > 17 or not string.match(v[2], '^%-?%d+$') then return nil end
  return tonumber(v[2])
end

-- ---- plan (reads only): pages of `done` until `limit` are found or none is older ----
local gone, stale, rescore = {}, {}, {}
local offset = 0
while #gone < limit do
  local page = redis.call('ZRANGEBYSCORE', K_DONE, '-inf', '(' .. H.fmt(before), 'LIMIT', offset, limit)
  for _, id in ipairs(page) do
    local ended = terminal_end(id)
    if ended == nil then
      stale[#stale + 1] = id
    elseif ended >= before then
      rescore[#rescore + 1] = {H.fmt(ended), id}
    elseif #gone < limit then
      gone[#gone + 1] = id
    end
  end
  if #page < limit then break end
  offset = offset + #page
end

-- Removes execution `id` and everything that names it (`forget` in scripts/forget.lua).
local function purge(id)
  H.forget(id)
  -- Out of its priority level's ready set and its key's live set (a terminal record is in
  -- neither: removed all the same, as below).
  local v = redis.call('HMGET', H.k_exec(id), 'pr', 'ck', 'st', 'cg', 'sq', 'wf')
  H.ready_rem(tonumber(v[1]) or 0, id)
  if v[2] then
    redis.call('ZREM', H.live_key(v[2]), id)
    redis.call('ZREM', H.line_key(v[2]), id)
  end
  H.count_move(v[4], v[3], nil)
  if v[3] then H.browse_move(tonumber(v[5]), id, v[6] or nil, v[2] or nil, v[3], nil) end
  redis.call('DEL', H.k_exec(id), P .. 'steps:' .. id, P .. 'hist:' .. id)
  H.forget_effects(id)
end

-- ---- write ----
for _, id in ipairs(gone) do purge(id) end
if #gone > 0 and split then redis.call('SADD', P .. 'purged', unpack(gone)) end
if #gone > 0 then
  redis.call('ZREM', K_DONE, unpack(gone))
  -- A terminal record is in none of these (place() keeps it out); removed all the same,
  -- so no index can name a purged id.
  for _, name in ipairs({'ready', 'waiting', 'running', 'running_es', 'failing'}) do
    redis.call('ZREM', P .. name, unpack(gone))
  end
end
if #stale > 0 then redis.call('ZREM', K_DONE, unpack(stale)) end
for _, m in ipairs(rescore) do redis.call('ZADD', K_DONE, m[1], m[2]) end
return gone
