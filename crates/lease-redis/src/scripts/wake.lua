-- lease-redis: request_wake's transition, shared by request_wake.lua and the scripts that
-- wake in the same atomic step as their write (effect_settle.lua, store_update.lua).
-- Needs record.lua.

-- ExecutionRecord::request_wake(at) on the stored record of `id`: terminal -> no change;
-- stored status running -> wake_after_claim = min(wake_after_claim, at) (remembered for the
-- acknowledgement); otherwise due_at = min(due_at, at), and the indexes follow.
-- Returns 'unknown' (no such record) or 'ok', and the instant to publish on the wake
-- channel (nil when nothing changed or a live lease holds the execution: its holder folds
-- the wake into its acknowledgement, which publishes). The caller publishes once per
-- script, the minimum (publish_wake).
function H.wake(id, at)
  local r = H.load(id)
  if r == nil then return 'unknown', nil end
  if H.terminal(r.st) then return 'ok', nil end
  local old = H.copy(r)
  if r.st == 'running' then
    r.wk = H.min_opt(r.wk, at)
    if r.wk == old.wk then return 'ok', nil end
  else
    r.du = H.min_opt(r.du, at)
    if r.du == old.du then return 'ok', nil end
  end
  H.save(r, old)
  H.place(r, old)
  if r.st ~= 'running' or r.le <= H.clock_now() then return 'ok', (H.claimable_at(r)) end
  return 'ok', nil
end

-- Whether `id`'s stored record can be woken: it loads (a missing one loads as nil and is
-- skipped by wake). A script that wakes after its own writes checks its waiters with this
-- first, so a corrupt waiter record (load raises) is skipped instead of aborting the script
-- half-way through its writes.
function H.wakeable(id)
  return (pcall(H.load, id))
end

-- Wakes each execution of `ids` at `at` (wake); returns the earliest instant to publish.
function H.wake_each(ids, at)
  local publish_at = nil
  for _, id in ipairs(ids) do
    local _, instant = H.wake(id, at)
    publish_at = H.min_opt(publish_at, instant)
  end
  return publish_at
end
