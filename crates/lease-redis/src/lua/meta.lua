-- connect: claims the namespace for this library's layout, or reports what holds it.
-- ARGV[3] layout version. Reply: the layout version stored in the namespace.
local key = P .. 'meta'
redis.call('HSETNX', key, 'layout', ARGV[3])
return redis.call('HGET', key, 'layout') or ''
