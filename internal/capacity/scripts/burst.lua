-- Take a queued job out of the queue to run on rented instances, fenced by
-- the dispatch lease, and remember the burst request so a new leader can
-- deliver it again.
-- KEYS: lease, queue, bursting, queue-changes, rev
-- ARGV: holder, job ID, attempt, burst request JSON
-- Returns 1 if done, 0 if the job is no longer queued at that attempt,
-- -1 if the caller does not hold the lease.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
local queued = redis.call('HGET', KEYS[2], ARGV[2])
if not queued or tonumber(cjson.decode(queued).attempt) ~= tonumber(ARGV[3]) then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[4])
return 1
