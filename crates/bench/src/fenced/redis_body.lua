-- The application's write of the fenced rows: count the charge and store
-- its order (KEYS in the namespace's slot); returns the step's response, JSON text ARGV[2].
redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[2], ARGV[1])
return ARGV[2]
