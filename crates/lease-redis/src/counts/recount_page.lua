-- recount_page(g, id...): counts the given executions (ARGV[4..], one page of
-- the client's SCAN of the partition's `exec:*` keys) that are not yet counted in
-- generation g (ARGV[3]), and marks each counted (`cg`). Idempotent: a page read twice, or
-- by two recounts at once, counts each record once. No script walks the key space (a KEYS
-- inside a script blocks every client for O(keys)): one page per script, O(page).
-- Reply: the number of records counted, or -1 when the generation moved on meanwhile (a
-- claim ordered another recount): the client starts again.
--
-- A record in `corrupt` is marked 'x' (that index counts it); one with an unknown status
-- counts under `bad`; a running one once suspended joins `running_es` (records written
-- before it existed). A key under `exec:` that is not a hash is not counted.
local g = ARGV[3]
local K = P .. 'counts'
if redis.call('HGET', K, 'g') ~= g then return -1 end
local K_CORRUPT = P .. 'corrupt'
local n = 0
for i = 4, #ARGV do
  local id = ARGV[i]
  local key = P .. 'exec:' .. id
  local v = redis.pcall('HMGET', key, 'st', 'cg', 'es', 'le', 'al', 'un')
  if not v.err and v[2] ~= g and redis.call('EXISTS', key) == 1 then
    local set_aside = redis.call('ZSCORE', K_CORRUPT, id)
    if set_aside then
      if v[2] ~= 'x' then redis.call('HSET', key, 'cg', 'x') end
    else
      local name = v[1]
      if not STATUSES[name] then name = 'bad' end
      redis.call('HINCRBY', K, name, 1)
      redis.call('HSET', key, 'cg', g)
      local le = tonumber(v[4])
      -- A last attempt is in running_last instead (placed there by its claim).
      local al = tonumber(v[5] or '')
      local last = al and (tonumber(v[6] or '') or 0) + 1 >= al
      if name == 'running' and v[3] == '1' and le and not last then
        redis.call('ZADD', P .. 'running_es', H.fmt(le), id)
      end
      n = n + 1
    end
  end
end
return n
