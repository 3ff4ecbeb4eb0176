-- start with partitions, in the target's partition (after start/start_home.lua recorded the
-- request): admits the target unless it exists, marking it in the partition's `start_of`
-- as created by this request, so a repeated or concurrent start of the same request
-- recognises it. ARGV[3] request id, ARGV[4] target id, ARGV[5] workflow, ARGV[6] input
-- JSON, ARGV[7] wake publish command (see publish_wake), ARGV[8] the admission sequence the
-- client reserved at home (see create_record). Publishes the new target's due
-- time. Reply: {'created'} | {'existing'} (created by this request before) | {'taken'}
-- (another execution with that id exists).
H.check_key_types()
local start_of = P .. 'start_of'
if redis.call('EXISTS', H.k_exec(ARGV[4])) == 1 then
  if redis.call('HGET', start_of, ARGV[4]) == ARGV[3] then return {'existing'} end
  return {'taken'}
end
local now = H.clock_now()
H.create(ARGV[4], ARGV[5], ARGV[6], now, 0, '', nil, ARGV[8])
H.publish_wake(ARGV[7], now)
redis.call('HSET', start_of, ARGV[4], ARGV[3])
return {'created'}
