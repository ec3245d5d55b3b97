-- Remove a node from the view, unless a job still holds one of its GPUs.
-- The removal takes a new revision in the node changes log (read.lua).
-- KEYS: nodes, node-state, heartbeat, gpus, node-changes, shares, rev,
--       node-tasks
-- ARGV: node ID
-- Returns 0 if the node is unknown, -1 if it has allocated GPUs, else 1.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local p = ARGV[1] .. '/'
for _, k in ipairs({KEYS[4], KEYS[6]}) do
  for _, f in ipairs(redis.call('HKEYS', k)) do
    -- "<node>/<index>": the node part is everything before the last slash.
    if string.sub(f, 1, #p) == p and not string.find(string.sub(f, #p + 1), '/', 1, true) then
      return -1
    end
  end
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[8], ARGV[1])
redis.call('ZADD', KEYS[5], redis.call('INCR', KEYS[7]), ARGV[1])
return 1
