-- acknowledge_batch(acks), fenced per item: every item is checked before anything is
-- written; then each held item is acknowledged exactly as acknowledge does, all at one now.
-- ARGV[3] wake publish command (see publish_wake), ARGV[4..] four arguments per item, in
-- order: id, token, 'suspended' | 'completed' | 'failed', value JSON ('' for suspended).
-- No id twice.
-- Reply: {'ok', result1, result2, ...} with each result 'ok' (applied) or 'lost'
-- (unchanged); or, when an item is refused, nothing written and {word, i} naming the
-- first refused item (1-based): 'unknown' | 'zero' | 'foreign' | 'twice' (an id already in
-- the batch) | 'args' (the arguments are not whole items).
-- Publishes the earliest claimable instant among the acknowledged records that stay due,
-- or now when one is keyed (one message per batch).
if (#ARGV - 3) % 4 ~= 0 then return {'args', H.fmt(#ARGV)} end
local n = (#ARGV - 3) / 4
local records = {}
local seen = {}
for i = 1, n do
  local id = ARGV[4 * i]
  if seen[id] then return {'twice', H.fmt(i)} end
  seen[id] = true
  local held, r = H.lease_on(id, ARGV[4 * i + 1])
  if held == 'held' then
    records[i] = r
  elseif held ~= 'lost' then
    return {held, H.fmt(i)}
  end
end
local now = H.clock_now()
local out = {'ok'}
local earliest = nil
-- The items' index, browse-set and counter writes go out once per set (deferred).
H.deferred(function()
  for i = 1, n do
    local r = records[i]
    if r then
      local at, freed = H.acknowledge(r, ARGV[4 * i + 2], ARGV[4 * i + 3], now)
      earliest = H.min_opt(earliest, H.min_opt(at, freed))
      out[i + 1] = 'ok'
    else
      out[i + 1] = 'lost'
    end
  end
end)
H.publish_wake(ARGV[3], earliest)
return out
