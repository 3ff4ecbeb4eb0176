-- migrate: builds the retention indexes of key layout 2 over data written under layout 1
-- (which had none), one bounded batch per call, driven by the client at connect. Every
-- batch is idempotent, so concurrent or repeated migrations are harmless.
-- ARGV[3] the batch kind, then its items:
--   'done', ids...: each completed or failed record enters `done`, scored by its end;
--   'receipts', store id, receipt fields...: each field (`<execution>\31<step key>`) enters
--     `rcpt:<execution>` as `<store>\31<step key>`;
--   'starts', request id, target, ...: each pair enters `start_of` as target -> request;
--   'finish': layout 1 becomes 2.
-- Reply: the number of index entries written; for 'finish', the layout now stored.
local kind = ARGV[3]
local n = 0
if kind == 'done' then
  for i = 4, #ARGV do
    local v = redis.call('HMGET', H.k_exec(ARGV[i]), 'st', 'ld')
    if (v[1] == 'completed' or v[1] == 'failed') and v[2] and string.match(v[2], '^%-?%d+$') then
      n = n + redis.call('ZADD', P .. 'done', v[2], ARGV[i])
    end
  end
elseif kind == 'receipts' then
  local store = ARGV[4]
  for i = 5, #ARGV do
    local sep = string.find(ARGV[i], '\31', 1, true)
    if sep then
      n = n + redis.call('SADD', P .. 'rcpt:' .. string.sub(ARGV[i], 1, sep - 1),
        store .. '\31' .. string.sub(ARGV[i], sep + 1))
    end
  end
elseif kind == 'starts' then
  for i = 4, #ARGV - 1, 2 do
    n = n + redis.call('HSET', P .. 'start_of', ARGV[i + 1], ARGV[i])
  end
elseif kind == 'finish' then
  local key = P .. 'meta'
  if redis.call('HGET', key, 'layout') == '1' then redis.call('HSET', key, 'layout', '2') end
  return redis.call('HGET', key, 'layout') or ''
else
  return redis.error_reply('unknown migration batch ' .. tostring(kind))
end
return n
