-- Remove a job from the queue and forget a burst sent to it (a cancelled
-- job). A removed entry takes a new revision in the queue changes log, so
-- readers drop it (read.lua).
-- KEYS: queue, bursting, queue-changes, rev
-- ARGV: job ID
-- Returns 1 if the job was queued, else 0.
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[4]), ARGV[1])
return 1
