-- lease-redis: acknowledging a delivery, shared by acknowledge and acknowledge_batch.

-- The stored record of execution `id` and how `token` stands on it: 'held', 'lost',
-- 'zero', 'foreign' (check_lease), or 'unknown' (no such execution; no record).
function H.lease_on(id, token)
  local r = H.load(id)
  if r == nil then return 'unknown', nil end
  return H.check_lease(r, token), r
end

-- ExecutionRecord::acknowledge on the held record `r` at `now`: ends the delivery with
-- `kind` ('suspended' | 'completed' | 'failed'; `value` the outcome JSON of a terminal
-- one) and writes the record and its indexes; a terminal one enters `done`, scored by
-- `now` (its last_delivery_ended_at), where purge_terminal finds it. Returns the record's
-- claimable instant (nil when it stays not due) and, for a keyed execution, `now`: the
-- place of its key this frees (key_freed); the caller publishes the earlier.
function H.acknowledge(r, kind, value, now)
  local old = H.copy(r)
  local extra = nil
  r.un = 0
  r.ld = now
  r.le = nil
  local wake_at = r.wk
  r.wk = nil
  -- A terminal acknowledgement leaves its delivery in the record (`tk`, `ca`, `ld`, the
  -- status), where the reader finds it: nothing is appended to the history, so the plain
  -- drain writes no list. A suspension appends it, since the next claim reuses the fields.
  if kind == 'suspended' then r.hend = {'suspended', now} end
  if kind == 'suspended' then
    r.st = 'suspended'
    r.es = true
    r.du = wake_at
  else
    r.st = kind
    r.du = nil
    extra = {'oc', kind, 'ov', value}
  end
  H.save(r, old, extra)
  H.place(r, old)
  if extra then H.zset_put(K_DONE, r.id, H.fmt(now)) end
  return (H.claimable_at(r)), H.key_freed(r, now)
end
