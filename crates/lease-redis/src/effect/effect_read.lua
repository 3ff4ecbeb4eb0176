-- read_effect(id). ARGV[3] effect id.
-- Reply: {'none'} | {'found', record...} (effect_reply).
local v = H.effect_fields(ARGV[3])
if not v[1] then return {'none'} end
return H.effect_reply('found', v)
