-- Register (upsert) a node's inventory and record a heartbeat.
-- A cordoned node stays cordoned; any other state (new, lost) becomes ready,
-- because the agent that registers it is alive.
-- A changed inventory gets a new revision, so readers fetch it again.
-- KEYS: nodes, node-state, heartbeat, node-revs, rev
-- ARGV: node ID, gangway.Node JSON, now (unix ms)
-- Returns the node's state after registration.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('HSET', KEYS[4], ARGV[1], redis.call('INCR', KEYS[5]))
end
local prev = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
if tonumber(ARGV[3]) > prev then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
end
local state = redis.call('HGET', KEYS[2], ARGV[1])
if state ~= 'cordoned' then
  state = 'ready'
  redis.call('HSET', KEYS[2], ARGV[1], state)
end
return state
