-- lease-redis: effect and store-waiter keys (RFC 004 reduced), after base.lua.
--
--   effect:<id>            hash  x owner execution, b begun_at ms, s settled_at ms and
--                                r result JSON (both absent while pending), w '1' while the
--                                owner waits for the settle
--   effects:<execution>    set   the effects the execution began (purge_terminal)
--   watch:<store>\31<key>  set   executions waiting for the next applied update of the entry
--   watching:<execution>   set   the entries the execution waits on, as <store>\31<key>
--   wakes                  zset  with partitions: wakes not yet delivered, execution
--                                id scored by a sequence number from `wake_seq` (a string)
--
-- With partitions these keys live under the home prefix, and the executions in their own
-- partitions (other slots): the scripts then take ARGV 'split' = '1', skip what needs the
-- execution (its existence, checked by the client first; its wake), and queue each wake in
-- `wakes` instead. The client delivers the queue in each partition (wake_waiters.lua) and
-- then removes exactly the entries it delivered (wakes_done.lua): a wake is delivered at
-- least once, by the writer or by a later settle or store update of the namespace.
function H.k_effect(id) return P .. 'effect:' .. id end
function H.k_effects_of(id) return P .. 'effects:' .. id end
function H.k_watch(entry) return P .. 'watch:' .. entry end
function H.k_watching(id) return P .. 'watching:' .. id end

-- Refuses, before the script's first write, a key of `types` (key -> kind) holding another
-- kind (another program writing into our prefix): WRONGTYPE, nothing changed.
-- (`check_key_type` of scripts/ops.lua, which every effect script is built on.)
function H.check_types(types)
  for key, kind in pairs(types) do H.check_key_type(key, kind) end
end

-- The stored effect `id`: {owner, begun, settled, result, waits} (owner nil when there is
-- none). A hash without an owner is corrupt (LeaseError::Protocol, nothing changed).
function H.effect_fields(id)
  local v = redis.call('HMGET', H.k_effect(id), 'x', 'b', 's', 'r', 'w')
  if not v[1] and redis.call('EXISTS', H.k_effect(id)) == 1 then H.corrupt('effect ' .. id) end
  return v
end

-- The reply form of an effect record: {status, owner, begun, settled or '', result or ''}
-- (the client decodes and validates it).
function H.effect_reply(status, v)
  return {status, v[1], v[2] or '', v[3] or '', v[4] or ''}
end

-- Refuses a foreign key in the wake queue's place (WRONGTYPE); called before a script's
-- first write when it may queue.
function H.check_wake_queue()
  H.check_key_type(P .. 'wakes', 'zset')
  H.check_key_type(P .. 'wake_seq', 'string')
end

-- Queues a wake of each execution of `ids` (split namespace; check_wake_queue first): a
-- fresh sequence number each, so a delivery that read an older entry does not remove this
-- one.
function H.queue_wakes(ids)
  for _, id in ipairs(ids) do
    redis.call('ZADD', P .. 'wakes', redis.call('INCR', P .. 'wake_seq'), id)
  end
end

-- `reply` followed, on a split namespace, by the oldest queued wakes (at most 100) as
-- id, sequence pairs, for the client to deliver.
function H.with_queued_wakes(reply, split)
  if not split then return reply end
  for _, v in ipairs(redis.call('ZRANGE', P .. 'wakes', 0, 99, 'WITHSCORES')) do
    reply[#reply + 1] = v
  end
  return reply
end

-- Removes execution `id`'s effects and its store-waiter registrations (purge_terminal).
function H.forget_effects(id)
  local began, watching = H.k_effects_of(id), H.k_watching(id)
  for _, e in ipairs(redis.call('SMEMBERS', began)) do redis.call('DEL', H.k_effect(e)) end
  for _, entry in ipairs(redis.call('SMEMBERS', watching)) do
    redis.call('SREM', H.k_watch(entry), id)
  end
  redis.call('DEL', began, watching)
end
