-- wait_effect(id, execution) (EffectClient.wait, unfenced): a settled effect is returned and
-- nothing registered; a pending one marks its owner as waiting (field w), so the settle
-- that records the first result wakes it.
-- ARGV[3] effect id, ARGV[4] execution id.
-- Reply: {'unknown'} | {'other' | 'settled' | 'registered', record...} (effect_reply).
local id, x = ARGV[3], ARGV[4]
local v = effect_fields(id)
if not v[1] then return {'unknown'} end
if v[1] ~= x then return effect_reply('other', v) end
if v[3] then return effect_reply('settled', v) end
redis.call('HSET', k_effect(id), 'w', '1')
return effect_reply('registered', v)
