-- Free every GPU a job holds and drop its allocation, unless the allocation
-- belongs to a newer attempt than the caller's: a late release from an old
-- attempt must never free the GPUs of the attempt that replaced it.
-- KEYS: allocs, gpus
-- ARGV: job ID, attempt
-- Returns the number of GPUs freed.
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  return 0
end
local a = cjson.decode(raw).assignment
if (tonumber(a.attempt) or 0) > tonumber(ARGV[2]) then
  return 0
end
local fields = {}
if type(a.members) == 'table' then
  for _, m in ipairs(a.members) do
    if type(m.gpus) == 'table' then
      for _, g in ipairs(m.gpus) do
        fields[#fields + 1] = m.nodeId .. '/' .. string.format('%d', g)
      end
    end
  end
end
local freed = 0
for _, f in ipairs(fields) do
  -- Only free what this job owns; the view never lets a GPU have two owners.
  if redis.call('HGET', KEYS[2], f) == ARGV[1] then
    redis.call('HDEL', KEYS[2], f)
    freed = freed + 1
  end
end
redis.call('HDEL', KEYS[1], ARGV[1])
return freed
