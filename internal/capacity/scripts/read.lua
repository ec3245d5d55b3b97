-- Read nodes, GPU owners, allocations and (optionally) the queue at one
-- instant, together with the server's clock. Node records are sent only when
-- they changed since the caller's last read (see nodecache.go).
-- KEYS: nodes, node-state, heartbeat, gpus, queue, allocs, node-revs, rev,
--       epoch, shares, rebuilt, node-tasks, checkpoints
-- ARGV: "1" to include the queue, "nodes" for the node records alone; the
--       caller's epoch ("" for none) and the revision its node records are at
-- Returns {TIME, epoch, rev, node IDs, their revisions, changed nodes,
-- node-state, heartbeat, gpus, queue, allocs, shares, rebuilt, node-tasks,
-- checkpoints}; changed nodes and every hash are flat HGETALL-style lists;
-- rebuilt is the epoch the view was last rebuilt for (false if none). With
-- "nodes" the reply ends after the changed nodes.
local now = redis.call('TIME')
local epoch = redis.call('GET', KEYS[9])
if not epoch then
  -- A view with no epoch is new, or was flushed: every caller reads it whole.
  epoch = now[1] .. '.' .. now[2]
  redis.call('SET', KEYS[9], epoch)
end
local rev = tonumber(redis.call('GET', KEYS[8]) or '0')
local since = tonumber(ARGV[3]) or 0
if epoch ~= ARGV[2] or since > rev then
  since = -1
end

local ids = redis.call('HKEYS', KEYS[1])
local revs = {}
local changed = {}
-- HMGET in chunks: Lua's unpack takes a few thousand values at most.
for first = 1, #ids, 1000 do
  local last = math.min(first + 999, #ids)
  local part = redis.call('HMGET', KEYS[7], unpack(ids, first, last))
  for j = 1, #part do
    revs[first + j - 1] = part[j]
  end
end
for i, id in ipairs(ids) do
  local r = tonumber(revs[i]) or 0
  revs[i] = r
  if r > since then
    changed[#changed + 1] = id
    changed[#changed + 1] = redis.call('HGET', KEYS[1], id)
  end
end

if ARGV[1] == 'nodes' then
  return {now, epoch, rev, ids, revs, changed}
end

local queue = {}
if ARGV[1] == '1' then
  queue = redis.call('HGETALL', KEYS[5])
end
return {
  now,
  epoch,
  rev,
  ids,
  revs,
  changed,
  redis.call('HGETALL', KEYS[2]),
  redis.call('HGETALL', KEYS[3]),
  redis.call('HGETALL', KEYS[4]),
  queue,
  redis.call('HGETALL', KEYS[6]),
  redis.call('HGETALL', KEYS[10]),
  redis.call('GET', KEYS[11]),
  redis.call('HGETALL', KEYS[12]),
  redis.call('HGETALL', KEYS[13]),
}
