-- Read nodes, allocations and (optionally) the queue at one instant,
-- together with the server's clock. Node records, their states,
-- heartbeats and tasks, queue entries and allocations are sent only when
-- they changed since the caller's last read (see nodecache.go): a read's
-- reply grows with what changed, not with the fleet or the queue.
-- KEYS: nodes, node-state, heartbeat, queue, allocs, node-changes, rev,
--       epoch, rebuilt, node-tasks, checkpoints, queue-changes,
--       changes-floor, alloc-changes, gpus, shares, bursting
-- ARGV: "1" to include the queue, "0" not to, "nodes" for the node
--       records alone; the caller's epoch ("" for none), the revision its
--       nodes are at, the one its queue entries are at, its heartbeat
--       mark (the TIME in ms of its last read; "" for none), the
--       revision its allocations are at (-1 for none cached), and the
--       latest change it knows the view made: its generation ("" for
--       none), revision and witness (below)
-- Returns {TIME, epoch, rev, nodes whole (1 or 0), node count, changed
-- nodes, their states, heartbeats, tasks, queue whole, queue count,
-- changed queue entries, allocs whole, alloc count, changed allocs,
-- rebuilt, checkpoints, witness}. Changed nodes, states, tasks, queue entries and
-- allocations are flat ID, value lists in which a removed one's value is
-- nil; a whole read sends every one (and no nil). Heartbeats are those of
-- the changed nodes (nil for a removed one, or one never heard from) and
-- of every node that beat since the mark (or was made silent: 0). The
-- GPUs held, whole or in shares (P:gpus, P:shares), are not sent: they are
-- the allocations' members, which commit, release and restore write
-- together with them. checkpoints is a whole HGETALL-style
-- list; rebuilt is the epoch the view was last rebuilt for (false if
-- none). With "nodes" the reply is {TIME, epoch, rev, nodes whole, node
-- count, changed nodes, witness}.
local now = redis.call('TIME')
local epoch = redis.call('GET', KEYS[8])
if not epoch then
  -- A view with no epoch is new, or was flushed: every caller reads it whole.
  epoch = now[1] .. '.' .. now[2]
  redis.call('SET', KEYS[8], epoch)
end
local rev = tonumber(redis.call('GET', KEYS[7]) or '0')
local floor = tonumber(redis.call('GET', KEYS[13]) or '0')
local logs = {KEYS[6], KEYS[12], KEYS[14]}

-- Every revision is one change of a node, a queue entry or an allocation,
-- logged by its ID in one of the changes logs; the witness of revision
-- rev names it ("<log>:<ID>"). A caller that knows of a change at
-- revision s of this generation with witness w knows the view went back
-- in time — it lost writes the caller read or made: a failover to a
-- replica that missed them, a restart from an older snapshot — when the
-- view is now at a revision below s, or w's entry was last changed before
-- s (or is gone from its log): in a view that only moves forward an
-- entry's revision only grows, and writes made after the view went back,
-- which take revisions again from the old count, do not hide it. So is a
-- view whose generation began before the caller's.
local function witness()
  if rev == 0 then
    return ''
  end
  for i, log in ipairs(logs) do
    local ids = redis.call('ZRANGEBYSCORE', log, rev, rev, 'LIMIT', 0, 1)
    if #ids > 0 then
      return i .. ':' .. ids[1]
    end
  end
  return ''
end

-- before says whether generation a began before generation b (each the
-- server's TIME then, "<seconds>.<microseconds>").
local function before(a, b)
  local as, au = string.match(a, '^(%d+)%.(%d+)$')
  local bs, bu = string.match(b, '^(%d+)%.(%d+)$')
  if not as or not bs then
    return false
  end
  as, au, bs, bu = tonumber(as), tonumber(au), tonumber(bs), tonumber(bu)
  return as < bs or (as == bs and au < bu)
end

local function wentBack()
  local gen, s = ARGV[7] or '', tonumber(ARGV[8] or '')
  if before(epoch, gen) then
    -- An older generation than the caller's: a restart from a snapshot
    -- taken before the view was last lost.
    return true
  end
  if epoch ~= gen or not s then
    return false
  end
  if s > rev then
    return true
  end
  local i, id = string.match(ARGV[9] or '', '^(%d):(.*)$')
  if not i or s <= floor then
    -- No witness, or one whose removal the log may have forgotten.
    return false
  end
  local at = redis.call('ZSCORE', logs[tonumber(i)], id)
  return not at or tonumber(at) < s
end

if wentBack() then
  -- What the view holds of the queue and the allocations is then of an
  -- older moment, and the rebuild (rebuild.go) restores them from what
  -- holds the truth, as for a flushed view: drop them and begin a new
  -- generation, which every caller reads whole and the dispatch leader
  -- rebuilds before it places anything. Nodes, their states and
  -- heartbeats stay: the agents and cordons write them again.
  redis.call('DEL', KEYS[4], KEYS[12], KEYS[5], KEYS[14], KEYS[15], KEYS[16], KEYS[11], KEYS[17])
  epoch = now[1] .. '.' .. now[2]
  redis.call('SET', KEYS[8], epoch)
end
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
  return {now, epoch, rev, nodeWhole, nodeCount, nodes, witness()}
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
  witness(),
}
