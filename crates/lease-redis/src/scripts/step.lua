-- lease-redis: the step-record helpers shared by write_step and the fenced scripts
-- (fenced_script, step_in_script), so both check the token and write a record the same way.

local function k_steps(id) return P .. 'steps:' .. id end

-- The fence of every step write: 'held' while token `token_s` is execution `id`'s current
-- token and its delivery has not ended, else the refusal word check_lease gives ('lost',
-- 'zero', 'foreign'), or 'unknown' when the execution does not exist. Reads `st` and `tk`
-- only and writes nothing; a corrupt field aborts before any write. No clock is consulted.
local function fence(id, token_s)
  local h = redis.call('HMGET', k_exec(id), 'st', 'tk')
  if not h[1] then return 'unknown' end
  if not STATUSES[h[1]] then corrupt('execution ' .. id .. ': status') end
  return check_lease({st = h[1], tk = int(h[2], id, 'token')}, token_s)
end

-- Inserts step record `field` = `value` (token|done|response) of execution `id` unless one
-- exists: nil when inserted, else the stored value (records never change once written).
local function insert_step(id, field, value)
  local key = k_steps(id)
  if redis.call('HSETNX', key, field, value) == 1 then return nil end
  return redis.call('HGET', key, field)
end
