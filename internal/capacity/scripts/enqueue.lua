-- Add or overwrite a queue entry, idempotently. Activities run at least
-- once, so a retried enqueue may arrive after the job was committed, or
-- after a newer attempt was queued; both must leave things as they are.
-- KEYS: queue, allocs
-- ARGV: job ID, attempt, gangway.QueueEntry JSON
-- Returns 1 if the entry was written, 0 if it was ignored.
local attempt = tonumber(ARGV[2])
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
return 1
