-- watch_entry(store, key, waiter) (store waiter registration, unfenced): registers `waiter`
-- for the next applied update of the entry (store_update.lua wakes and unregisters it) and
-- returns the entry's value, read in this script.
-- ARGV[3] store id, ARGV[4] entry key, ARGV[5] waiter execution id, ARGV[6] split ('1':
-- partitions, the client checked the waiter exists; see scripts/effect.lua).
-- Reply: {'noexec'} | {'nostore'} | {'ok'} (entry absent) | {'ok', value JSON}.
local store, key, waiter = ARGV[3], ARGV[4], ARGV[5]
if ARGV[6] ~= '1' and redis.call('EXISTS', H.k_exec(waiter)) == 0 then return {'noexec'} end
local v = redis.call('HMGET', P .. 'store:' .. store, '', key)
if not v[1] then return {'nostore'} end
local entry = store .. '\31' .. key
H.check_types({[H.k_watch(entry)] = 'set', [H.k_watching(waiter)] = 'set'})
redis.call('SADD', H.k_watch(entry), waiter)
redis.call('SADD', H.k_watching(waiter), entry)
if v[2] then return {'ok', v[2]} end
return {'ok'}
