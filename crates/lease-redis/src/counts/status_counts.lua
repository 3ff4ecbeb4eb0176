-- status_counts(id...): the given executions (ARGV[3..], one page of the client's SCAN of
-- the partition's `exec:*` keys) by effective status at the script's clock (issue 15, the
-- operator command's `status`; issue 25 item 7).
-- Reply: {now, admitted, running, suspended, completed, failed, cancelled, corrupt}.
--
-- The indexes cannot answer it (a suspended execution without a wake is in none of them,
-- and `done` does not tell completed from failed), so every record is read; the walk over
-- the key space is the client's SCAN between scripts, never a KEYS inside one: a script
-- that walks the whole database blocks the server past the busy-script limit, and then
-- every client's renewal fails with BUSY. Each script reads one page: O(page).
-- A running record whose lease has expired (or has no expiry) counts as its delivery ended
-- (ExecutionRecord::effective). A record a claim set aside (`corrupt`), of an unknown
-- status or of the wrong key type counts as corrupt; a key gone since the SCAN counts as
-- nothing.
local now = clock_now()
local c = {admitted = 0, running = 0, suspended = 0, completed = 0, failed = 0, cancelled = 0,
  corrupt = 0}
local K_CORRUPT = P .. 'corrupt'
for i = 3, #ARGV do
  local id = ARGV[i]
  local key = P .. 'exec:' .. id
  if redis.call('EXISTS', key) == 1 then
    local v = redis.pcall('HMGET', key, 'st', 'le', 'es')
    local st = type(v) == 'table' and not v.err and v[1] or nil
    if not STATUSES[st] or redis.call('ZSCORE', K_CORRUPT, id) then
      st = 'corrupt'
    elseif st == 'running' then
      local le = tonumber(v[2])
      if le == nil or le <= now then
        if v[3] == '1' then st = 'suspended' else st = 'admitted' end
      end
    end
    c[st] = c[st] + 1
  end
end
return {fmt(now), c.admitted, c.running, c.suspended, c.completed, c.failed, c.cancelled, c.corrupt}
