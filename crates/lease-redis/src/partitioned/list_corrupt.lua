-- list_corrupt(limit): the records claims moved out of the indexes as corrupt, by id.
-- ARGV[3] limit. Reply: {id1, problem1, id2, problem2, ...}.
local ids = redis.call('ZRANGE', P .. 'corrupt', 0, tonumber(ARGV[3]) - 1)
local out = {}
for _, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', P .. 'corrupt_why', id) or ''
end
return out
