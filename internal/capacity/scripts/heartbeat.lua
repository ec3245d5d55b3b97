-- Record a node heartbeat at the Redis server's time, the one clock every
-- reader judges liveness by (read.lua's TIME), whatever the agent's clock
-- says. Time only moves forward, so a delayed heartbeat never makes a node
-- look older than it is.
-- KEYS: nodes, heartbeat
-- ARGV: node ID
-- Returns 0 if the node was never registered, else 1.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prev = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if now > prev then
  redis.call('HSET', KEYS[2], ARGV[1], string.format('%d', now))
end
return 1
