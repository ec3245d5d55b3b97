-- Set a registered node's state (ready, cordoned, lost).
-- KEYS: nodes, node-state
-- ARGV: node ID, state
-- Returns 0 if the node was never registered, else 1.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
