-- admit(id): create admitted and due now unless it exists (idempotent by identity).
-- ARGV[3] id, ARGV[4] workflow ('' = none), ARGV[5] input JSON ('' = none).
-- Reply: {now} when created (the client knows the new record), else {now, HGETALL}.
check_key_types()
local now = clock_now()
local key = k_exec(ARGV[3])
if redis.call('EXISTS', key) == 0 then
  create(ARGV[3], ARGV[4], ARGV[5], now)
  return {fmt(now)}
end
return {fmt(now), redis.call('HGETALL', key)}
