-- The torture workflow's application write, the body of a fenced step
-- script: appends the row (JSON text, ARGV[1]) to the run's row list KEYS[1] (a key in the
-- namespace's slot) and returns the step's response (JSON text, ARGV[2]). A list, not a set:
-- a step written twice must show up as two rows.
redis.call('RPUSH', KEYS[1], ARGV[1])
return ARGV[2]
