-- Record heartbeats of many nodes at once (the nodes one process hosts).
-- Each is heartbeat.lua for one node: time only moves forward, and a node
-- that was never registered is reported instead of created.
-- KEYS: nodes, heartbeat
-- ARGV: now (unix ms), node ID...
-- Returns the IDs that are not registered.
local now = tonumber(ARGV[1])
local missing = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  if redis.call('HEXISTS', KEYS[1], id) == 0 then
    missing[#missing + 1] = id
  else
    local prev = tonumber(redis.call('HGET', KEYS[2], id) or '0')
    if now > prev then
      redis.call('HSET', KEYS[2], id, ARGV[1])
    end
  end
end
return missing
