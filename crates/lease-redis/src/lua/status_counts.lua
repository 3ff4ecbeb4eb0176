-- status_counts(): the namespace's executions by effective status at the script's clock,
-- in one script, hence atomic (issue 15, the operator command's `status`).
-- Reply: {now, admitted, running, suspended, completed, failed, corrupt}.
--
-- The indexes cannot answer it (a suspended execution without a wake is in none of them,
-- and `done` does not tell completed from failed), so the script lists the namespace's
-- `exec:*` keys with KEYS (each key exactly once; SCAN may repeat one) and reads three
-- fields of each: O(keys on the server), blocking it meanwhile. An operator's call.
-- A running record whose lease has expired (or has no expiry) counts as its delivery ended
-- (ExecutionRecord::effective). A record a claim set aside (`corrupt`), of an unknown
-- status or of the wrong key type counts as corrupt.
local now = clock_now()
local c = {admitted = 0, running = 0, suspended = 0, completed = 0, failed = 0, corrupt = 0}
local K_CORRUPT = P .. 'corrupt'
local skip = #P + #'exec:'
for _, key in ipairs(redis.call('KEYS', P .. 'exec:*')) do
  local v = redis.pcall('HMGET', key, 'st', 'le', 'es')
  local st = type(v) == 'table' and not v.err and v[1] or nil
  if not STATUSES[st] or redis.call('ZSCORE', K_CORRUPT, string.sub(key, skip + 1)) then
    st = 'corrupt'
  elseif st == 'running' then
    local le = tonumber(v[2])
    if le == nil or le <= now then
      if v[3] == '1' then st = 'suspended' else st = 'admitted' end
    end
  end
  c[st] = c[st] + 1
end
return {fmt(now), c.admitted, c.running, c.suspended, c.completed, c.failed, c.corrupt}
