-- Set a registered node's state (ready, cordoned, lost).
-- A change takes a new revision in the node changes log (read.lua).
-- KEYS: nodes, node-state, node-changes, rev
-- ARGV: node ID, state
-- Returns 0 if the node was never registered, else 1.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[4]), ARGV[1])
end
return 1
