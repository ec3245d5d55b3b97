-- Read nodes, allocations and (optionally) the queue at one instant,
-- together with the server's clock. Node records, their states,
-- heartbeats and tasks, queue entries and allocations are sent only when
-- they changed since the caller's last read (see nodecache.go): a read's
-- reply grows with what changed, not with the fleet or the queue.
-- KEYS: nodes, node-state, heartbeat, queue, allocs, node-changes, rev,
--       epoch, rebuilt, node-tasks, checkpoints, queue-changes,
--       changes-floor, alloc-changes
-- ARGV: "1" to include the queue, "0" not to, "nodes" for the node
--       records alone; the caller's epoch ("" for none), the revision its
--       nodes are at, the one its queue entries are at, its heartbeat
--       mark (the TIME in ms of its last read; "" for none), and the
--       revision its allocations are at (-1 for none cached)
-- Returns {TIME, epoch, rev, nodes whole (1 or 0), node count, changed
-- nodes, their states, heartbeats, tasks, queue whole, queue count,
-- changed queue entries, allocs whole, alloc count, changed allocs,
-- rebuilt, checkpoints}. Changed nodes, states, tasks, queue entries and
-- allocations are flat ID, value lists in which a removed one's value is
-- nil; a whole read sends every one (and no nil). Heartbeats are those of
-- the changed nodes (nil for a removed one, or one never heard from) and
-- of every node that beat since the mark (or was made silent: 0). The
-- GPUs held, whole or in shares (P:gpus, P:shares), are not sent: they are
-- the allocations' members, which commit, release and restore write
-- together with them. checkpoints is a whole HGETALL-style
-- list; rebuilt is the epoch the view was last rebuilt for (false if
-- none). With "nodes" the reply ends after the changed nodes.
local now = redis.call('TIME')
local epoch = redis.call('GET', KEYS[8])
if not epoch then
  -- A view with no epoch is new, or was flushed: every caller reads it whole.
  epoch = now[1] .. '.' .. now[2]
  redis.call('SET', KEYS[8], epoch)
end
local rev = tonumber(redis.call('GET', KEYS[7]) or '0')
local floor = tonumber(redis.call('GET', KEYS[13]) or '0')
-- since is the revision a caller's cache is at, or -1 when it must read
-- whole: another epoch, a revision from the future, or one older than the
-- removals the changes logs have forgotten.
local function since(arg)
  local s = tonumber(arg)
  if not s or epoch ~= ARGV[2] or s > rev or s < floor then
    return -1
  end
  return s
end

-- The entries of hash h changed since revision s by its changes log (a
-- sorted set of IDs by the revision of their last write or removal): a
-- flat ID, value list, the value false (nil to the caller) for a removed
-- one; every entry when s is -1.
local function changes(h, log, s)
  if s < 0 then
    return redis.call('HGETALL', h)
  end
  local out = {}
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', log, '(' .. s, '+inf')) do
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', h, id)
  end
  return out
end

-- compact forgets removals older than keep revisions once the log of h
-- holds many more IDs than h (every removal takes a revision of its own,
-- so afterwards at most keep are left), raising the floor below which a
-- caller must read whole.
local keep = 8192
local function compact(h, log)
  if redis.call('ZCARD', log) - redis.call('HLEN', h) <= keep then
    return
  end
  local old = redis.call('ZRANGEBYSCORE', log, '-inf', rev - keep, 'WITHSCORES')
  for i = 1, #old, 2 do
    if redis.call('HEXISTS', h, old[i]) == 0 then
      redis.call('ZREM', log, old[i])
      floor = math.max(floor, tonumber(old[i + 1]))
    end
  end
  redis.call('SET', KEYS[13], string.format('%d', floor))
end

local nodeSince = since(ARGV[3])
local nodes = changes(KEYS[1], KEYS[6], nodeSince)
local nodeWhole = nodeSince < 0 and 1 or 0
local nodeCount = redis.call('HLEN', KEYS[1])
if ARGV[1] == 'nodes' then
  compact(KEYS[1], KEYS[6])
  return {now, epoch, rev, nodeWhole, nodeCount, nodes}
end

local states, beats, tasks = {}, {}, {}
if nodeWhole == 1 then
  states = redis.call('HGETALL', KEYS[2])
  beats = redis.call('HGETALL', KEYS[3])
  tasks = redis.call('HGETALL', KEYS[10])
else
  local function add(id, withState)
    if withState then
      states[#states + 1] = id
      states[#states + 1] = redis.call('HGET', KEYS[2], id)
    end
    beats[#beats + 1] = id
    beats[#beats + 1] = redis.call('HGET', KEYS[3], id)
    tasks[#tasks + 1] = id
    tasks[#tasks + 1] = redis.call('HGET', KEYS[10], id)
  end
  local sent = {}
  for i = 1, #nodes, 2 do
    sent[nodes[i]] = true
    add(nodes[i], true)
  end
  -- A heartbeat carries the node's tasks: both are sent for every node
  -- that beat at or after the mark (heartbeat.lua writes them together,
  -- at the server's time, which only moves forward).
  local mark = tonumber(ARGV[5])
  local all = redis.call('HGETALL', KEYS[3])
  for i = 1, #all, 2 do
    local ms = tonumber(all[i + 1]) or 0
    if not sent[all[i]] and (not mark or ms >= mark or ms == 0) then
      add(all[i], false)
    end
  end
end

local queueWhole, queueCount, queue = 0, 0, {}
if ARGV[1] == '1' then
  local s = since(ARGV[4])
  queue = changes(KEYS[4], KEYS[12], s)
  queueWhole = s < 0 and 1 or 0
  queueCount = redis.call('HLEN', KEYS[4])
end
local allocSince = since(ARGV[6])
local allocs = changes(KEYS[5], KEYS[14], allocSince)
local allocWhole = allocSince < 0 and 1 or 0
local allocCount = redis.call('HLEN', KEYS[5])
compact(KEYS[1], KEYS[6])
compact(KEYS[4], KEYS[12])
compact(KEYS[5], KEYS[14])
return {
  now,
  epoch,
  rev,
  nodeWhole,
  nodeCount,
  nodes,
  states,
  beats,
  tasks,
  queueWhole,
  queueCount,
  queue,
  allocWhole,
  allocCount,
  allocs,
  redis.call('GET', KEYS[9]),
  redis.call('HGETALL', KEYS[11]),
}
