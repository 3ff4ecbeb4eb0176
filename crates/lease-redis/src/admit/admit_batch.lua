-- admit_batch(admissions): each item exactly as admit (created unless its id exists), in
-- one script, at one clock reading. The client validated the batch (no id twice, scheduled
-- instants in range) first.
-- ARGV[3] wake publish command (see publish_wake), ARGV[4] the items' admission sequences,
-- comma separated ('' = each the next of this prefix's counter; see create_record),
-- ARGV[5..] seven arguments per item, in order: id, workflow ('' = none), input JSON ('' = none), not_before ms ('' = due now),
-- priority ('' = 0), concurrency key ('' = none), W3C trace context ('' = none).
-- Reply: {now, r1, r2, ...}, ri the integer 1 when item i was created, else its HGETALL.
-- Publishes the earliest due time among the created records (one message per batch).
check_key_types()
if (#ARGV - 4) % 7 ~= 0 then return {'args'} end
local seqs = {}
for s in string.gmatch(ARGV[4], '%d+') do seqs[#seqs + 1] = s end
local now = clock_now()
local out = {fmt(now)}
local ready = {}
local earliest = nil
for i = 1, (#ARGV - 4) / 7 do
  local b = 7 * i - 2
  local id = ARGV[b]
  local key = k_exec(id)
  if redis.call('EXISTS', key) == 0 then
    local due = now
    if ARGV[b + 3] ~= '' then due = tonumber(ARGV[b + 3]) end
    local pr = tonumber(ARGV[b + 4]) or 0
    create_record(id, ARGV[b + 1], ARGV[b + 2], due, pr, ARGV[b + 5], ARGV[b + 6], seqs[i])
    if pr == 0 then
      ready[#ready + 1] = fmt(due)
      ready[#ready + 1] = id
    else
      ready_add(pr, fmt(due), id)
    end
    if earliest == nil or due < earliest then earliest = due end
    out[#out + 1] = 1
  else
    out[#out + 1] = redis.call('HGETALL', key)
  end
end
-- The created records of level 0 join ready as create() would put them, in one ZADD.
if #ready > 0 then redis.call('ZADD', P .. 'ready', unpack(ready)) end
publish_wake(ARGV[3], earliest)
return out
