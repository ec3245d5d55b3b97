-- Add or overwrite a queue entry, idempotently. Activities run at least
-- once, so a retried enqueue may arrive after the job was committed, or
-- after a newer attempt was queued; both must leave things as they are.
-- A job the dispatch loop sent to burst left the queue for rented
-- instances: a retried plain enqueue of that attempt must not put it back;
-- the enqueue pinned to its instances (ARGV[4] = "1") replaces the burst
-- record, and so does any later attempt.
-- KEYS: queue, allocs, bursting, queue-changes, rev
-- ARGV: job ID, attempt, gangway.QueueEntry JSON, "1" if pinned to nodes
-- Returns 1 if the entry was written, 0 if it was ignored.
local attempt = tonumber(ARGV[2])
local burst = redis.call('HGET', KEYS[3], ARGV[1])
if burst then
  local battempt = tonumber(cjson.decode(burst).attempt) or 0
  if battempt > attempt or (battempt == attempt and ARGV[4] ~= '1') then
    return 0
  end
end
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held then
  local a = cjson.decode(held).assignment
  if (tonumber(a.attempt) or 0) >= attempt then
    return 0
  end
end
local queued = redis.call('HGET', KEYS[1], ARGV[1])
if queued then
  if (tonumber(cjson.decode(queued).attempt) or 0) > attempt then
    return 0
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
