-- Record a node heartbeat. Time only moves forward, so a retried or delayed
-- heartbeat never makes a node look older than it is.
-- KEYS: nodes, heartbeat
-- ARGV: node ID, now (unix ms)
-- Returns 0 if the node was never registered, else 1.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local prev = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if tonumber(ARGV[2]) > prev then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
return 1
