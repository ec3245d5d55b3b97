-- Record a node heartbeat at the Redis server's time, the one clock every
-- reader judges liveness by (read.lua's TIME), whatever the agent's clock
-- says. Time only moves forward, so a delayed heartbeat never makes a node
-- look older than it is. The heartbeat carries the tasks the agent runs
-- (JSON; "" for none), so a lost view learns from the agents which GPUs
-- are busy.
-- KEYS: heartbeat, node-tasks
-- ARGV: node ID, tasks JSON
-- The caller checks that the node is registered first: the script touches
-- no other key, so an agent's Redis user needs write access to these two
-- alone, and only read access to the inventory.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prev = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if now > prev then
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', now))
end
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
return 1
