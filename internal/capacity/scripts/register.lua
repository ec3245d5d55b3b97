-- Register (upsert) a node's inventory and record a heartbeat at the Redis
-- server's time (see heartbeat.lua).
-- A cordoned node stays cordoned; any other state (new, lost) becomes ready,
-- because the agent that registers it is alive.
-- A changed inventory gets a new revision, so readers fetch it again.
-- KEYS: nodes, node-state, heartbeat, node-revs, rev
-- ARGV: node ID, gangway.Node JSON
-- Returns the node's state after registration.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('HSET', KEYS[4], ARGV[1], redis.call('INCR', KEYS[5]))
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prev = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
if now > prev then
  redis.call('HSET', KEYS[3], ARGV[1], string.format('%d', now))
end
local state = redis.call('HGET', KEYS[2], ARGV[1])
if state ~= 'cordoned' then
  state = 'ready'
  redis.call('HSET', KEYS[2], ARGV[1], state)
end
return state
