-- Rebuild a lost view's allocations and admin node state from what holds
-- the truth (rebuild.go): the assignments the job workflows hold, as
-- Commit writes them but without a queue entry (the job was placed before
-- the view was lost) and on nodes not yet registered again; and the nodes'
-- cordons, from the durable store. A job already allocated is left alone;
-- an assignment a GPU of which another job holds is refused (returned),
-- never written over.
--
-- KEYS: allocs, gpus, shares, lease, epoch, node-state, node-changes, rev,
--       alloc-changes (a restored allocation is logged there: read.lua)
-- ARGV: lease holder, generation (epoch), allocations JSON:
--   [{"job", "attempt", "cpuMilli", "memMiB", "members": [{"node", "gpus", "milli"}],
--     "assignment": "<gangway.Assignment JSON>"}],
--   node states JSON: {"node": "cordoned", ...}, and when those are every
--   cordon there is (the durable store's, read after the rebuild's
--   snapshot) that snapshot's revision, so that a node the view showed
--   cordoned then and they do not is ready again (a view that went back
--   in time can hold a cordon lifted since; one cordoned after the
--   snapshot stays so), else ""
-- Returns {"ok", restored, refused "job: why"...} or {"not-leader" | "stale", detail}.
if redis.call('GET', KEYS[4]) ~= ARGV[1] then
  return {'not-leader', 'the caller does not hold the dispatch lease'}
end
if redis.call('GET', KEYS[5]) ~= ARGV[2] then
  return {'stale', 'the view was flushed or replaced again'}
end
local function num(x)
  if type(x) == 'number' then
    return x
  end
  return 0
end
local out = {'ok', 0}
for _, a in ipairs(cjson.decode(ARGV[3])) do
  if not redis.call('HGET', KEYS[1], a.job) then
    local conflict = nil
    for _, m in ipairs(a.members) do
      for _, g in ipairs(m.gpus) do
        local f = m.node .. '/' .. string.format('%d', g)
        local owner = redis.call('HGET', KEYS[2], f)
        if owner and owner ~= a.job then
          conflict = f .. ' is held by ' .. owner
        end
        local sh = redis.call('HGET', KEYS[3], f)
        local milli = num(m.milli)
        if sh and not (milli > 0 and milli < 1000) then
          conflict = f .. ' is shared'
        end
      end
    end
    if conflict then
      out[#out + 1] = a.job .. ': ' .. conflict
    else
      for _, m in ipairs(a.members) do
        local milli = num(m.milli)
        for _, g in ipairs(m.gpus) do
          local f = m.node .. '/' .. string.format('%d', g)
          if milli > 0 and milli < 1000 then
            local s = {}
            local raw = redis.call('HGET', KEYS[3], f)
            if raw then
              s = cjson.decode(raw)
            end
            s[a.job] = num(s[a.job]) + milli
            redis.call('HSET', KEYS[3], f, cjson.encode(s))
          else
            redis.call('HSET', KEYS[2], f, a.job)
          end
        end
      end
      redis.call('ZADD', KEYS[9], redis.call('INCR', KEYS[8]), a.job)
      redis.call('HSET', KEYS[1], a.job, string.format('{"cpuMilli":%d,"memMiB":%d,"assignment":%s}',
        num(a.cpuMilli), num(a.memMiB), a.assignment))
      out[2] = out[2] + 1
    end
  end
end
local states = cjson.decode(ARGV[4])
local function set(node, state)
  if redis.call('HGET', KEYS[6], node) ~= state then
    redis.call('HSET', KEYS[6], node, state)
    redis.call('ZADD', KEYS[7], redis.call('INCR', KEYS[8]), node)
  end
end
for node, state in pairs(states) do
  set(node, state)
end
local asOf = tonumber(ARGV[5])
if asOf then
  local all = redis.call('HGETALL', KEYS[6])
  for i = 1, #all, 2 do
    local node = all[i]
    if all[i + 1] == 'cordoned' and not states[node]
        and tonumber(redis.call('ZSCORE', KEYS[7], node) or '0') <= asOf then
      set(node, 'ready')
    end
  end
end
return out
