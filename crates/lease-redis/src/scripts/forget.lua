-- lease-redis: what purge_terminal removes besides an execution's own keys (shared by
-- purge_terminal.lua and forget_at_home.lua): the store receipts execution `id` made (each
-- member of `rcpt:<id>` names a field of a `receipts:<store>` hash) and the start record
-- `start_of` points to.
function H.forget(id)
  local rk = P .. 'rcpt:' .. id
  for _, m in ipairs(redis.call('SMEMBERS', rk)) do
    local sep = string.find(m, '\31', 1, true)
    if sep then
      redis.call('HDEL', P .. 'receipts:' .. string.sub(m, 1, sep - 1), id .. '\31' .. string.sub(m, sep + 1))
    end
  end
  local request = redis.call('HGET', P .. 'start_of', id)
  if request then
    if redis.call('HGET', P .. 'starts', request) == id then redis.call('HDEL', P .. 'starts', request) end
    redis.call('HDEL', P .. 'start_of', id)
  end
  redis.call('DEL', rk)
end
