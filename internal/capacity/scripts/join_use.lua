-- Count a node's use of a one-use launch token (internal/nodeauth): each
-- node of the launch may join with it, as often as it needs to, but no
-- more nodes than were launched.
-- KEYS: the launch's uses (a set of node IDs)
-- ARGV: node ID, max nodes, expiry (unix ms)
-- Returns 1 when the node may use the token, 0 when max others did.
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then
  return 1
end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 1
