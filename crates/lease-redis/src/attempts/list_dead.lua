-- list_dead(after, limit): this prefix's dead executions by id, strictly after ARGV[3]
-- ('' = from the first), at most ARGV[4]. Reply: {now, id1, HGETALL1, ...}.
--
-- Dead executions are the stored-dead ones (`dead`, score 0, so a lexicographic range) and
-- the running ones whose last attempt expired at or before now (`running_last` scored by
-- lease expiry; claims bury them, so there are few): both read, merged by id.
local now = H.clock_now()
local after, limit = ARGV[3], tonumber(ARGV[4])
local from = '-'
if after ~= '' then from = '(' .. after end
local ids = redis.call('ZRANGEBYLEX', P .. 'dead', from, '+', 'LIMIT', 0, limit)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'running_last', '-inf', H.fmt(now))) do
  if after == '' or id > after then ids[#ids + 1] = id end
end
table.sort(ids)
local out = {H.fmt(now)}
for i = 1, math.min(#ids, limit) do
  local raw = redis.call('HGETALL', H.k_exec(ids[i]))
  if #raw > 0 then
    out[#out + 1] = ids[i]
    out[#out + 1] = raw
  end
end
return out
