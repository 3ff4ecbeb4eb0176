-- reserve_sequences(n), on the home prefix of a split namespace: the next `n` values of the
-- namespace's admission counter `seq`, for admissions whose partitions (other slots) cannot
-- take them themselves. ARGV[3] n. Reply: the last one reserved (they are last - n + 1 ..=
-- last).
H.check_key_type(P .. 'seq', 'string')
return redis.call('INCRBY', P .. 'seq', tonumber(ARGV[3]))
