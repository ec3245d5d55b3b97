-- Record a node heartbeat at the Redis server's time, the one clock every
-- reader judges liveness by (read.lua's TIME), whatever the agent's clock
-- says. Time only moves forward, so a delayed heartbeat never makes a node
-- look older than it is.
-- KEYS: heartbeat
-- ARGV: node ID
-- The caller checks that the node is registered first: the script touches
-- no other key, so an agent's Redis user needs write access to the
-- heartbeats alone, and only read access to the inventory.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prev = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if now > prev then
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', now))
end
return 1
