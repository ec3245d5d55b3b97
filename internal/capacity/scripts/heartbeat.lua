-- Record a node heartbeat. Time only moves forward, so a retried or delayed
-- heartbeat never makes a node look older than it is.
-- KEYS: heartbeat
-- ARGV: node ID, now (unix ms)
-- The caller checks that the node is registered first: the script touches
-- no other key, so an agent's Redis user needs write access to the
-- heartbeats alone, and only read access to the inventory.
local prev = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > prev then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return 1
