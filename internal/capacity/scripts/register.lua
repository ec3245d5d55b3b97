-- Register (upsert) a node's inventory and record a heartbeat at the Redis
-- server's time (see heartbeat.lua).
-- A cordoned node stays cordoned; any other state (new, lost) becomes ready,
-- because the agent that registers it is alive.
-- A changed inventory or state gets a new revision in the node changes
-- log, so readers fetch the node again.
-- KEYS: nodes, node-state, heartbeat, node-changes, rev
-- ARGV: node ID, gangway.Node JSON
-- Returns the node's state after registration.
local changed = false
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  changed = true
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prev = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
if now > prev then
  redis.call('HSET', KEYS[3], ARGV[1], string.format('%d', now))
end
local state = redis.call('HGET', KEYS[2], ARGV[1])
if state ~= 'cordoned' then
  changed = changed or state ~= 'ready'
  state = 'ready'
  redis.call('HSET', KEYS[2], ARGV[1], state)
end
if changed then
  redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), ARGV[1])
end
return state
