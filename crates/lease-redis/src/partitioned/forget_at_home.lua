-- forget_at_home(ids): with partitions, the part of purge_terminal that lies under the home
-- prefix (store receipts and start records live there, not in the executions' partitions):
-- `forget` for each execution the partition's purge_terminal removed, and its effects and
-- store-waiter registrations (`forget_effects`, scripts/effect.lua: with partitions they
-- live at home too).
-- ARGV[3..] the purged ids. Reply: 'ok'.
for i = 3, #ARGV do
  H.forget(ARGV[i])
  H.forget_effects(ARGV[i])
end
return 'ok'
