-- list_live_leases(limit): the live leases of this prefix, soonest expiry first (the
-- console lists them). ARGV[3] limit. Reply: {now, id1, HGETALL1, id2, HGETALL2, ...}.
--
-- One range read of the `running` index (scored by lease expiry): its members scored above
-- now are the live leases, at most `limit` of them, members of one score in id (byte)
-- order, the order the client sorts by; then each one's record. O(log n + limit): no key is
-- scanned.
local now = H.clock_now()
local out = {H.fmt(now)}
local ids = redis.call('ZRANGEBYSCORE', P .. 'running', '(' .. H.fmt(now), '+inf',
  'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  local raw = redis.call('HGETALL', H.k_exec(id))
  if #raw > 0 then
    out[#out + 1] = id
    out[#out + 1] = raw
  end
end
return out
