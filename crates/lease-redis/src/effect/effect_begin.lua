-- begin_effect(id, execution) (EffectClient.begin, idempotent by the effect id): creates the
-- effect, pending, owned by `execution`, unless it exists; a repeat returns its record.
-- ARGV[3] effect id, ARGV[4] execution id, ARGV[5] split ('1': partitions, the client
-- checked the execution exists; see scripts/effect.lua).
-- Reply: {'noexec'} | {'created', now} | {'existing' | 'other', record...} (effect_reply;
-- 'other' when another execution owns it).
local id, x = ARGV[3], ARGV[4]
if ARGV[5] ~= '1' and redis.call('EXISTS', H.k_exec(x)) == 0 then return {'noexec'} end
local v = H.effect_fields(id)
if v[1] then return H.effect_reply(v[1] == x and 'existing' or 'other', v) end
H.check_types({[H.k_effects_of(x)] = 'set'})
local now = H.fmt(H.clock_now())
redis.call('HSET', H.k_effect(id), 'x', x, 'b', now)
redis.call('SADD', H.k_effects_of(x), id)
return {'created', now}
