-- list_failing(min, limit): candidates for the executions whose effective unacknowledged
-- deliveries reach `min`; the client computes the effective records, sorts and truncates.
-- ARGV[3] min (>= 1), ARGV[4] limit.
-- Reply: {now, id1, HGETALL1, id2, HGETALL2, ...}.
--
-- Candidates: every running execution whose lease has expired (its effective count is one
-- more than stored), plus the first limit + #expired members of the failing index (stored
-- count >= min, most failing first, then id), which hold the top `limit` of the rest.
local now = H.clock_now()
local m = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local out = {H.fmt(now)}
local expired = redis.call('ZRANGEBYSCORE', P .. 'running', '-inf', H.fmt(now))
local skip = {}
for _, id in ipairs(expired) do
  skip[id] = true
  local un = tonumber(redis.call('HGET', H.k_exec(id), 'un'))
  if un == nil or un + 1 >= m then
    local raw = redis.call('HGETALL', H.k_exec(id))
    if #raw > 0 then
      out[#out + 1] = id
      out[#out + 1] = raw
    end
  end
end
local failing = redis.call('ZRANGEBYSCORE', P .. 'failing', '-inf', H.fmt(-m), 'LIMIT', 0, limit + #expired)
for _, id in ipairs(failing) do
  if not skip[id] then
    local raw = redis.call('HGETALL', H.k_exec(id))
    if #raw > 0 then
      out[#out + 1] = id
      out[#out + 1] = raw
    end
  end
end
return out
