-- Free every GPU a job holds, whole or in shares, and drop its allocation,
-- unless the allocation belongs to a newer attempt than the caller's: a late
-- release from an old attempt must never free the GPUs of the attempt that
-- replaced it. The job's checkpoint record goes with its allocation.
-- The removal takes a new revision in the allocation changes log (read.lua).
-- KEYS: allocs, gpus, shares, checkpoints, alloc-changes, rev
-- ARGV: job ID, attempt
-- Returns the number of GPUs freed: each member's GPUs, whole or shared.
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  redis.call('HDEL', KEYS[4], ARGV[1])
  return 0
end
local a = cjson.decode(raw).assignment
if (tonumber(a.attempt) or 0) > tonumber(ARGV[2]) then
  return 0
end
local whole, shares = {}, {} -- shares: GPU field -> the job's members on it
if type(a.members) == 'table' then
  for _, m in ipairs(a.members) do
    local milli = tonumber(m.milli) or 0
    if type(m.gpus) == 'table' then
      for _, g in ipairs(m.gpus) do
        local f = m.nodeId .. '/' .. string.format('%d', g)
        if milli > 0 and milli < 1000 then
          shares[f] = (shares[f] or 0) + 1
        else
          whole[#whole + 1] = f
        end
      end
    end
  end
end
local freed = 0
for _, f in ipairs(whole) do
  -- Only free what this job owns; the view never lets a GPU have two owners.
  if redis.call('HGET', KEYS[2], f) == ARGV[1] then
    redis.call('HDEL', KEYS[2], f)
    freed = freed + 1
  end
end
for f, members in pairs(shares) do
  local s = redis.call('HGET', KEYS[3], f)
  if s then
    s = cjson.decode(s)
    if s[ARGV[1]] then
      s[ARGV[1]] = nil
      freed = freed + members
      if next(s) == nil then
        redis.call('HDEL', KEYS[3], f)
      else
        redis.call('HSET', KEYS[3], f, cjson.encode(s))
      end
    end
  end
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[5], redis.call('INCR', KEYS[6]), ARGV[1])
return freed
