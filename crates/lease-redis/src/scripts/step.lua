-- lease-redis: the step-record helpers shared by write_step and the fenced scripts
-- (fenced_script, step_in_script), so both check the token and write a record the same way.

function H.k_steps(id) return P .. 'steps:' .. id end

-- The fence of every step write: 'held' while token `token_s` is execution `id`'s current
-- token and its delivery has not ended, else the refusal word check_lease gives ('lost',
-- 'zero', 'foreign'), or 'unknown' when the execution does not exist. Reads `st` and `tk`
-- (and, for a last attempt, `al`, `un` and `le`) and writes nothing; a corrupt field aborts
-- before any write. The clock is consulted only for a last attempt (check_lease).
function H.fence(id, token_s)
  local h = redis.call('HMGET', H.k_exec(id), 'st', 'tk', 'al', 'un', 'le')
  if not h[1] then return 'unknown' end
  if not STATUSES[h[1]] then H.corrupt('execution ' .. id .. ': status') end
  local r = {st = h[1], tk = H.int(h[2], id, 'token')}
  if h[3] and h[1] == 'running' then
    r.al = H.int(h[3], id, 'attempt limit')
    r.un = H.int(h[4], id, 'unacknowledged deliveries')
    r.le = H.int(h[5], id, 'lease_expires_at')
  end
  return H.check_lease(r, token_s)
end

-- Inserts step record `field` = `value` (token|done|response) of execution `id` unless one
-- exists: nil when inserted, else the stored value (records never change once written).
function H.insert_step(id, field, value)
  local key = H.k_steps(id)
  if redis.call('HSETNX', key, field, value) == 1 then return nil end
  return redis.call('HGET', key, field)
end
