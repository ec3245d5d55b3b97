-- Record heartbeats of many nodes at once (the nodes one process hosts).
-- Each is heartbeat.lua for one node: the Redis server's time, only moving
-- forward, and a node that was never registered is reported instead of
-- created.
-- KEYS: nodes, heartbeat, node-tasks
-- ARGV: node ID, its tasks JSON ("" for none), node ID, tasks, ...
-- Returns the IDs that are not registered.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stamp = string.format('%d', now)
local missing = {}
for i = 1, #ARGV, 2 do
  local id, tasks = ARGV[i], ARGV[i + 1]
  if redis.call('HEXISTS', KEYS[1], id) == 0 then
    missing[#missing + 1] = id
  else
    local prev = tonumber(redis.call('HGET', KEYS[2], id) or '0')
    if now > prev then
      redis.call('HSET', KEYS[2], id, stamp)
    end
    if tasks == '' then
      redis.call('HDEL', KEYS[3], id)
    else
      redis.call('HSET', KEYS[3], id, tasks)
    end
  end
end
return missing
