-- connect: claims the prefix for this library's layout, or reports what holds it.
-- ARGV[3] layout version, ARGV[4] the handle's partition count. A fresh prefix stores both
-- (the count only when above 1, so one partition keeps the layout from before partitions)
-- and complete, empty status counters; an existing one is left as it is.
-- Reply: {stored layout version, stored partition count ('1' when none is stored)}.
local key = P .. 'meta'
if redis.call('HSETNX', key, 'layout', ARGV[3]) == 1 then
  if ARGV[4] ~= '1' then redis.call('HSET', key, 'partitions', ARGV[4]) end
  -- A fresh prefix holds no record: its status counters (`counts`: see
  -- scripts/ops.lua) start complete, in generation 1. A prefix from before the counters has
  -- none; its first status_counts recounts it (counts.rs).
  if redis.call('EXISTS', P .. 'counts') == 0 then
    redis.call('HSET', P .. 'counts', 'g', '1', 'ok', '1')
  end
end
return {redis.call('HGET', key, 'layout') or '', redis.call('HGET', key, 'partitions') or '1'}
