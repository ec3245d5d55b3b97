-- Record one usage segment, idempotently, after trimming expired ones.
-- Activities run at least once and workflows replay, so the same segment
-- may arrive many times; only the first is written.
-- KEYS: segments (hash), by-end (zset), by-job (zset)
-- ARGV: segment ID, segment JSON, end (unix ms), cutoff (unix ms; segments
--       ending before it are dropped), trim batch size
-- Returns 1 if the segment was new, 0 if it was already there or too old.
local cutoff = ARGV[4]
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. cutoff, 'LIMIT', 0, tonumber(ARGV[5]))
if #old > 0 then
  redis.call('HDEL', KEYS[1], unpack(old))
  redis.call('ZREM', KEYS[2], unpack(old))
  redis.call('ZREM', KEYS[3], unpack(old))
end
if tonumber(ARGV[3]) < tonumber(cutoff) then
  return 0
end
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return 0
end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[3], 0, ARGV[1])
return 1
