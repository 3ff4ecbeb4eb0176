-- update(receipt, op): applies `op` once per receipt and records its outcome atomically;
-- a known receipt returns the recorded outcome. Mirrors StoreOp::apply byte for byte
-- (payloads are canonical JSON, so equality is string equality).
-- ARGV[3] store id, ARGV[4] receipt field (execution id, \31, step key),
-- ARGV[5] 'put' | 'delete' | 'cas' | 'take', ARGV[6] entry key,
-- ARGV[7] '1' when an expected value is given, ARGV[8] expected, ARGV[9] new value,
-- ARGV[10] wake publish command, ARGV[11] split ('1': partitions, waiters' wakes are queued;
-- see scripts/effect.lua).
-- Reply: {'nostore'} | {'replayed', outcome} | {'applied', outcome}, where outcome is
-- applied ('0'|'1') .. has previous ('0'|'1') .. previous JSON; on a split namespace the
-- last two are followed by the queued wakes (with_queued_wakes).
-- A new receipt is also indexed under its execution: `rcpt:<execution>` holds
-- `<store>\31<step key>`, so purge_terminal drops an execution's receipts without a scan.
-- An applied op wakes the entry's store waiters (watch_entry) in this script:
-- `wake` at now for each, and the registrations are gone (one-shot).
local split = ARGV[11] == '1'
local key = P .. 'store:' .. ARGV[3]
if redis.call('EXISTS', key) == 0 then return {'nostore'} end
local receipts = P .. 'receipts:' .. ARGV[3]
local recorded = redis.call('HGET', receipts, ARGV[4])
if recorded then return H.with_queued_wakes({'replayed', recorded}, split) end
local op = ARGV[5]
local entry = ARGV[6]
local current = redis.call('HGET', key, entry)
local applied = false
local set = nil
local delete = false
if op == 'put' then
  applied = true
  set = ARGV[9]
elseif op == 'delete' then
  applied = current ~= false
  delete = true
elseif op == 'cas' then
  local matches
  if ARGV[7] == '1' then matches = current == ARGV[8] else matches = current == false end
  if matches then
    applied = true
    set = ARGV[9]
  end
elseif op == 'take' then
  if current == ARGV[8] then
    applied = true
    delete = true
  end
else
  return {'badop'}
end
local watched = ARGV[3] .. '\31' .. entry
local registered, waiters = {}, {}
if applied then
  registered = redis.call('SMEMBERS', H.k_watch(watched))
  for _, w in ipairs(registered) do
    if split or H.wakeable(w) then waiters[#waiters + 1] = w end
  end
  if split and #registered > 0 then H.check_wake_queue() end
end
if set ~= nil then
  redis.call('HSET', key, entry, set)
elseif delete and current then
  redis.call('HDEL', key, entry)
end
local outcome = (applied and '1' or '0')
if current then outcome = outcome .. '1' .. current else outcome = outcome .. '0' end
redis.call('HSET', receipts, ARGV[4], outcome)
local sep = string.find(ARGV[4], '\31', 1, true)
if sep then
  redis.call('SADD', P .. 'rcpt:' .. string.sub(ARGV[4], 1, sep - 1),
    ARGV[3] .. '\31' .. string.sub(ARGV[4], sep + 1))
end
if #registered > 0 then
  redis.call('DEL', H.k_watch(watched))
  for _, w in ipairs(registered) do redis.call('SREM', H.k_watching(w), watched) end
  if split then
    H.queue_wakes(waiters)
  else
    H.publish_wake(ARGV[10], H.wake_each(waiters, H.clock_now()))
  end
end
return H.with_queued_wakes({'applied', outcome}, split)
