-- Read nodes, GPU owners, allocations and (optionally) the queue at one
-- instant, together with the server's clock. Node records and queue entries
-- are sent only when they changed since the caller's last read (see
-- nodecache.go).
-- KEYS: nodes, node-state, heartbeat, gpus, queue, allocs, node-revs, rev,
--       epoch, shares, rebuilt, node-tasks, checkpoints, queue-revs
-- ARGV: "1" to include the queue, "nodes" for the node records alone; the
--       caller's epoch ("" for none), the revision its node records are at
--       and the one its queue entries are at
-- Returns {TIME, epoch, rev, node IDs, their revisions, changed nodes,
-- node-state, heartbeat, gpus, queued job IDs, allocs, shares, rebuilt,
-- node-tasks, checkpoints, changed queue entries}; changed nodes, changed
-- queue entries and every hash are flat HGETALL-style lists; rebuilt is
-- the epoch the view was last rebuilt for (false if none). With "nodes"
-- the reply ends after the changed nodes.
local now = redis.call('TIME')
local epoch = redis.call('GET', KEYS[9])
if not epoch then
  -- A view with no epoch is new, or was flushed: every caller reads it whole.
  epoch = now[1] .. '.' .. now[2]
  redis.call('SET', KEYS[9], epoch)
end
local rev = tonumber(redis.call('GET', KEYS[8]) or '0')
local function since(arg)
  local s = tonumber(arg) or 0
  if epoch ~= ARGV[2] or s > rev then
    return -1
  end
  return s
end

-- The IDs of hash h, their revisions in revs, and the values of those
-- newer than after.
local function newer(h, revs, after)
  local ids = redis.call('HKEYS', h)
  local rs = {}
  local changed = {}
  -- HMGET in chunks: Lua's unpack takes a few thousand values at most.
  for first = 1, #ids, 1000 do
    local last = math.min(first + 999, #ids)
    local part = redis.call('HMGET', revs, unpack(ids, first, last))
    for j = 1, #part do
      rs[first + j - 1] = part[j]
    end
  end
  for i, id in ipairs(ids) do
    local r = tonumber(rs[i]) or 0
    rs[i] = r
    if r > after then
      changed[#changed + 1] = id
      changed[#changed + 1] = redis.call('HGET', h, id)
    end
  end
  return ids, rs, changed
end

local ids, revs, changed = newer(KEYS[1], KEYS[7], since(ARGV[3]))
if ARGV[1] == 'nodes' then
  return {now, epoch, rev, ids, revs, changed}
end
local qids, qchanged = {}, {}
if ARGV[1] == '1' then
  local _
  qids, _, qchanged = newer(KEYS[5], KEYS[14], since(ARGV[4]))
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
  qids,
  redis.call('HGETALL', KEYS[6]),
  redis.call('HGETALL', KEYS[10]),
  redis.call('GET', KEYS[11]),
  redis.call('HGETALL', KEYS[12]),
  redis.call('HGETALL', KEYS[13]),
  qchanged,
}
