-- wakes_done(pairs) on a split namespace: removes from the home queue `wakes`
-- (scripts/effect.lua) each delivered entry whose sequence number is still the one
-- delivered; an entry queued again meanwhile has a higher one and stays.
-- ARGV[3..] execution id, sequence number pairs. Reply: 'ok'.
for i = 3, #ARGV - 1, 2 do
  if redis.call('ZSCORE', P .. 'wakes', ARGV[i]) == ARGV[i + 1] then
    redis.call('ZREM', P .. 'wakes', ARGV[i])
  end
end
return 'ok'
