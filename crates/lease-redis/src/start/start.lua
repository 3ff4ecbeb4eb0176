-- start(request): the first target of a known request id, or admit the target and record
-- request id -> target (idempotent by receipt).
-- ARGV[3] request id, ARGV[4] target id, ARGV[5] workflow, ARGV[6] input JSON,
-- ARGV[7] wake publish command (see publish_wake). Publishes the new target's due time.
-- Reply: {'existing', target} | {'created', target} | {'taken'} (target id already exists).
-- The reverse mapping target -> request id goes into `start_of` (purge_terminal drops the
-- start record naming a purged execution).
H.check_key_types()
local starts = P .. 'starts'
local known = redis.call('HGET', starts, ARGV[3])
if known then return {'existing', known} end
if redis.call('EXISTS', H.k_exec(ARGV[4])) == 1 then return {'taken'} end
local now = H.clock_now()
H.create(ARGV[4], ARGV[5], ARGV[6], now, 0, '')
H.publish_wake(ARGV[7], now)
redis.call('HSET', starts, ARGV[3], ARGV[4])
redis.call('HSET', P .. 'start_of', ARGV[4], ARGV[3])
return {'created', ARGV[4]}
