-- Record heartbeats of many nodes at once (the nodes one process hosts).
-- Each is heartbeat.lua for one node: the Redis server's time, only moving
-- forward, and a node that was never registered is reported instead of
-- created.
-- KEYS: nodes, heartbeat
-- ARGV: node ID...
-- Returns the IDs that are not registered.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stamp = string.format('%d', now)
local missing = {}
for i = 1, #ARGV do
  local id = ARGV[i]
  if redis.call('HEXISTS', KEYS[1], id) == 0 then
    missing[#missing + 1] = id
  else
    local prev = tonumber(redis.call('HGET', KEYS[2], id) or '0')
    if now > prev then
      redis.call('HSET', KEYS[2], id, stamp)
    end
  end
end
return missing
