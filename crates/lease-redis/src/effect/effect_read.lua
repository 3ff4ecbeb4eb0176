-- read_effect(id). ARGV[3] effect id.
-- Reply: {'none'} | {'found', record...} (effect_reply).
local v = effect_fields(ARGV[3])
if not v[1] then return {'none'} end
return effect_reply('found', v)
