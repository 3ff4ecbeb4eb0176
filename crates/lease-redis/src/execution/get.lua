-- get(id): the stored record and the clock's now (the client derives the effective record).
-- ARGV[3] id. Reply: {now, HGETALL of the execution (empty when unknown)}.
return {H.fmt(H.clock_now()), redis.call('HGETALL', H.k_exec(ARGV[3]))}
