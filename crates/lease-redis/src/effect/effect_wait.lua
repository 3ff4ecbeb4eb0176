-- wait_effect(id, execution) (EffectClient.wait, unfenced): a settled effect is returned and
-- nothing registered; a pending one marks its owner as waiting (field w), so the settle
-- that records the first result wakes it.
-- ARGV[3] effect id, ARGV[4] execution id.
-- Reply: {'unknown'} | {'other' | 'settled' | 'registered', record...} (effect_reply).
local id, x = ARGV[3], ARGV[4]
local v = H.effect_fields(id)
if not v[1] then return {'unknown'} end
if v[1] ~= x then return H.effect_reply('other', v) end
if v[3] then return H.effect_reply('settled', v) end
redis.call('HSET', H.k_effect(id), 'w', '1')
return H.effect_reply('registered', v)
