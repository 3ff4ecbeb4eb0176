-- forgotten(ids) on a partition of a split namespace: the home prefix no longer
-- holds anything about these purged executions (forget_at_home.lua ran), so they leave the
-- partition's set `purged` (see purge_terminal.lua).
-- ARGV[3..] the ids. Reply: 'ok'.
for i = 3, #ARGV do redis.call('SREM', P .. 'purged', ARGV[i]) end
return 'ok'
