-- Update GPU health: a node's inventory (its GPUs' healthy flags and
-- flakiness), the per-GPU health records, and the GPU event stream, all at
-- once, if nothing changed since the caller read them (compare and set).
-- A changed inventory gets a new revision, so readers fetch it again.
-- KEYS: nodes, gpu-health, gpu-events, node-changes, rev
-- ARGV: node ID, expected node JSON, new node JSON, event stream max length,
--       event JSON ("" for none), then triples: record field, expected
--       record JSON ("" when absent), new record JSON
-- Returns 1 when written, 0 when something changed (read again and retry).
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then
  return 0
end
for i = 6, #ARGV, 3 do
  if (redis.call('HGET', KEYS[2], ARGV[i]) or '') ~= ARGV[i + 1] then
    return 0
  end
end
if ARGV[3] ~= ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), ARGV[1])
end
for i = 6, #ARGV, 3 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
end
if ARGV[5] ~= '' then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'event', ARGV[5])
end
return 1
