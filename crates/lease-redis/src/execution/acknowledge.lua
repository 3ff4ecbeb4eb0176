-- acknowledge(lease, outcome), fenced: ends a held delivery with an outcome.
-- ARGV[3] id, ARGV[4] token, ARGV[5] 'suspended' | 'completed' | 'failed', ARGV[6] value JSON,
-- ARGV[7] wake publish command (see publish_wake).
-- Reply: {'ok'} | {'lost'} | {'unknown'} | {'zero'} | {'foreign'}.
-- Publishes the record's claimable instant when the outcome leaves it due (suspended with a
-- wake requested during the delivery), or now for a keyed execution (a place of its key is
-- free).
local held, r = H.lease_on(ARGV[3], ARGV[4])
if held ~= 'held' then return {held} end
local at, freed = H.acknowledge(r, ARGV[5], ARGV[6], H.clock_now())
H.publish_wake(ARGV[7], H.min_opt(at, freed))
return {'ok'}
