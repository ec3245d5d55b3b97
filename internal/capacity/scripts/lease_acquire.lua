-- Acquire or renew the dispatch leader lease: the holder renews its own
-- lease (compare and PEXPIRE); anyone else gets it only when it is free
-- (SET NX PX semantics, here in one step with the renewal).
-- KEYS: lease
-- ARGV: holder, ttl (ms)
-- Returns 1 if the holder now holds the lease, else 0.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if cur then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX')
return 1
