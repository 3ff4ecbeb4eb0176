-- admit_batch(admissions): each item exactly as admit (created unless its id exists), in
-- one script, at one clock reading. The client validated the batch (no id twice, scheduled
-- instants in range) first.
-- ARGV[3] wake publish command (see publish_wake), ARGV[4] the items' admission sequences,
-- comma separated ('' = each the next of this prefix's counter; see create_record),
-- ARGV[5..] seven arguments per item, in order: id, workflow ('' = none), input JSON ('' = none), not_before ms ('' = due now),
-- priority ('' = 0), concurrency key ('' = none), W3C trace context ('' = none).
-- Reply: {now, r1, r2, ...}, ri the integer 1 when item i was created, else its HGETALL.
-- Publishes the earliest due time among the created records (one message per batch).
H.check_key_types()
if (#ARGV - 4) % 7 ~= 0 then return {'args'} end
local seqs = {}
for s in string.gmatch(ARGV[4], '%d+') do seqs[#seqs + 1] = s end
local now = H.clock_now()
local out = {H.fmt(now)}
local n = (#ARGV - 4) / 7
-- Which items are new, read first, so their admission sequences (when the caller reserved
-- none) come from one INCRBY: the same values one INCR per created item would give.
local new = {}
for i = 1, n do
  local key = H.k_exec(ARGV[7 * i - 2])
  if redis.call('EXISTS', key) == 0 then
    new[#new + 1] = i
    out[i + 1] = 1
  else
    out[i + 1] = redis.call('HGETALL', key)
  end
end
if #new > 0 and #seqs == 0 then
  local first = redis.call('INCRBY', P .. 'seq', #new) - #new
  for j, i in ipairs(new) do seqs[i] = H.fmt(first + j) end
end
local earliest = nil
-- The records' ready-set, browse-set and counter writes go out once per set (deferred).
H.deferred(function()
  for _, i in ipairs(new) do
    local b = 7 * i - 2
    local due = now
    if ARGV[b + 3] ~= '' then due = tonumber(ARGV[b + 3]) end
    H.create(ARGV[b], ARGV[b + 1], ARGV[b + 2], due, tonumber(ARGV[b + 4]) or 0, ARGV[b + 5],
      ARGV[b + 6], seqs[i])
    if earliest == nil or due < earliest then earliest = due end
  end
end)
H.publish_wake(ARGV[3], earliest)
return out
