-- Read nodes, GPU owners, allocations and (optionally) the queue at one
-- instant, together with the server's clock.
-- KEYS: nodes, node-state, heartbeat, gpus, queue, allocs
-- ARGV: "1" to include the queue
-- Returns {TIME, nodes, node-state, heartbeat, gpus, queue, allocs}, each
-- hash as a flat HGETALL list.
local queue = {}
if ARGV[1] == '1' then
  queue = redis.call('HGETALL', KEYS[5])
end
return {
  redis.call('TIME'),
  redis.call('HGETALL', KEYS[1]),
  redis.call('HGETALL', KEYS[2]),
  redis.call('HGETALL', KEYS[3]),
  redis.call('HGETALL', KEYS[4]),
  queue,
  redis.call('HGETALL', KEYS[6]),
}
