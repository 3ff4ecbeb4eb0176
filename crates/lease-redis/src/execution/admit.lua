-- admit(admission): create admitted, due now or at its not_before, unless it exists
-- (idempotent by identity; an existing record is returned unchanged).
-- ARGV[3] id, ARGV[4] workflow ('' = none), ARGV[5] input JSON ('' = none),
-- ARGV[6] not_before ms ('' = due now), ARGV[7] wake publish command (see publish_wake),
-- ARGV[8] priority ('' = 0), ARGV[9] concurrency key ('' = none), ARGV[10] W3C trace
-- context ('' = none), ARGV[11] admission sequence ('' = the next of this prefix's counter;
-- see create_record).
-- Reply: {now} when created (the client knows the new record), else {now, HGETALL}.
-- Publishes the new record's due time when it created one.
H.check_key_types()
local now = H.clock_now()
local key = H.k_exec(ARGV[3])
if redis.call('EXISTS', key) == 0 then
  local due = now
  if ARGV[6] ~= nil and ARGV[6] ~= '' then due = tonumber(ARGV[6]) end
  H.create(ARGV[3], ARGV[4], ARGV[5], due, tonumber(ARGV[8]) or 0, ARGV[9], ARGV[10], ARGV[11])
  H.publish_wake(ARGV[7], due)
  return {H.fmt(now)}
end
return {H.fmt(now), redis.call('HGETALL', key)}
