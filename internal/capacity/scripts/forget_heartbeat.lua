-- Make a known node look silent: its heartbeat time goes to 0, so it gets
-- no new work until it heartbeats again (heartbeat.lua moves time forward
-- from there).
-- KEYS: nodes, heartbeat
-- ARGV: node ID
-- Returns 0 if the node is unknown, else 1.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], '0')
return 1
