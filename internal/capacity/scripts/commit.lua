-- Commit a placement plan: every gang in it, or nothing.
--
-- First pass checks everything and writes nothing; a failed check returns
-- which check failed for which job, node and GPU. Only when every check
-- passed does the second pass write. Nothing in the second pass can fail on
-- bad data, because Redis does not roll back a script's writes on error.
--
-- A member with 0 < milli < 1000 takes that share of each of its GPUs
-- (P:shares: GPU -> job -> milli, a job's members' shares of one GPU
-- summed); any other takes its GPUs whole (P:gpus). A GPU is held whole by
-- one job, or in shares summing to at most 1000 milli, never both.
--
-- The plan is fenced by the view's generation too: a view flushed or
-- replaced since the caller's snapshot takes no plan made from the old one.
--
-- KEYS: queue, allocs, gpus, nodes, node-state, lease, reasons, shares, epoch,
--       queue-changes, rev, alloc-changes (each job placed takes a revision
--       of its own, logged in the queue and the allocation changes logs:
--       read.lua)
-- ARGV: lease holder, plan JSON, the generation (epoch) of the caller's
--   snapshot ("" to skip the check):
--   [{"job": ID, "attempt": N, "members": [{"node": ID, "gpus": [i, ...], "milli": M}],
--     "assignment": "<gangway.Assignment JSON, stored verbatim>"}]
-- Returns {"ok", GPUs claimed, generation, revision, witness of the last
--   change} or
--   {"stale" | "not-leader", check, job, node, gpu (-1 for none), detail}.
local function fail(kind, check, job, node, gpu, detail)
  return {kind, check, job or '', node or '', gpu or -1, detail}
end

local holder = redis.call('GET', KEYS[6])
if holder ~= ARGV[1] then
  local detail = 'no lease holder'
  if holder then
    detail = 'lease held by ' .. holder
  end
  return fail('not-leader', 'lease', '', '', -1, detail)
end

if ARGV[3] ~= '' and redis.call('GET', KEYS[9]) ~= ARGV[3] then
  return fail('stale', 'generation', '', '', -1, 'the view was flushed or replaced since the snapshot')
end

local function num(x)
  if type(x) == 'number' then
    return x
  end
  return 0
end

local plan = cjson.decode(ARGV[2])
local entries = {}  -- plan index -> decoded queue entry
local seen = {}     -- job -> true
local claimed = {}  -- "<node>/<gpu>" -> job claiming it whole in this plan
local planned = {}  -- "<node>/<gpu>" -> milli claimed in shares in this plan

local function shared(m)
  local milli = num(m.milli)
  return milli > 0 and milli < 1000, milli
end

-- sharesOf returns the shares recorded on one GPU: job -> milli.
local function sharesOf(f)
  local raw = redis.call('HGET', KEYS[8], f)
  if raw then
    return cjson.decode(raw)
  end
  return {}
end
local inventory = {} -- node -> set of GPU indices, or false if not registered

for i, a in ipairs(plan) do
  local job = a.job
  if seen[job] then
    return fail('stale', 'duplicate-job', job, '', -1, 'job appears twice in the plan')
  end
  seen[job] = true

  local raw = redis.call('HGET', KEYS[1], job)
  if not raw then
    return fail('stale', 'not-queued', job, '', -1, 'job is not queued')
  end
  local e = cjson.decode(raw)
  if num(e.attempt) ~= a.attempt then
    return fail('stale', 'attempt', job, '', -1,
      string.format('queued attempt is %d, plan has %d', num(e.attempt), a.attempt))
  end
  local held = redis.call('HGET', KEYS[2], job)
  if held then
    return fail('stale', 'allocated', job, '', -1,
      string.format('job already holds GPUs for attempt %d', num(cjson.decode(held).assignment.attempt)))
  end
  entries[i] = e

  for _, m in ipairs(a.members) do
    local node = m.node
    local inv = inventory[node]
    if inv == nil then
      inv = false
      local n = redis.call('HGET', KEYS[4], node)
      if n then
        inv = {}
        local gpus = cjson.decode(n).gpus
        if type(gpus) == 'table' then
          for _, g in ipairs(gpus) do
            inv[num(g.index)] = true
          end
        end
      end
      inventory[node] = inv
    end
    if not inv then
      return fail('stale', 'node-missing', job, node, -1, 'node is not registered')
    end
    local state = redis.call('HGET', KEYS[5], node)
    if state ~= 'ready' then
      return fail('stale', 'node-not-ready', job, node, -1, 'node is ' .. tostring(state))
    end
    local isShare, milli = shared(m)
    for _, g in ipairs(m.gpus) do
      if not inv[g] then
        return fail('stale', 'gpu-missing', job, node, g, 'node has no such gpu')
      end
      local f = node .. '/' .. string.format('%d', g)
      local owner = redis.call('HGET', KEYS[3], f)
      if owner then
        return fail('stale', 'gpu-busy', job, node, g, 'gpu is held by job ' .. owner)
      end
      if claimed[f] then
        return fail('stale', 'gpu-twice', job, node, g, 'gpu is also claimed by job ' .. claimed[f] .. ' in this plan')
      end
      local held = 0
      for _, s in pairs(sharesOf(f)) do
        held = held + num(s)
      end
      if isShare then
        local total = held + (planned[f] or 0) + milli
        if total > 1000 then
          return fail('stale', 'gpu-full', job, node, g,
            string.format('shares would hold %d milli-GPU of 1000 (%d held, %d planned, %d asked)',
              total, held, planned[f] or 0, milli))
        end
        planned[f] = (planned[f] or 0) + milli
      else
        if held > 0 or planned[f] then
          return fail('stale', 'gpu-busy', job, node, g,
            string.format('gpu is shared (%d milli-GPU held in shares)', held + (planned[f] or 0)))
        end
        claimed[f] = job
      end
    end
  end
end

local n, last = 0, nil
for i, a in ipairs(plan) do
  local e = entries[i]
  redis.call('HDEL', KEYS[1], a.job)
  local r = redis.call('INCR', KEYS[11])
  last = {r, a.job}
  redis.call('ZADD', KEYS[10], r, a.job)
  redis.call('ZADD', KEYS[12], r, a.job)
  redis.call('HDEL', KEYS[7], a.job)
  for _, m in ipairs(a.members) do
    local isShare, milli = shared(m)
    for _, g in ipairs(m.gpus) do
      local f = m.node .. '/' .. string.format('%d', g)
      if isShare then
        -- Two replicas of one job may share one GPU: a job's share of a
        -- GPU is the sum of its members' shares of it.
        local s = sharesOf(f)
        s[a.job] = num(s[a.job]) + milli
        redis.call('HSET', KEYS[8], f, cjson.encode(s))
      else
        redis.call('HSET', KEYS[3], f, a.job)
      end
      n = n + 1
    end
  end
  -- Per-member CPU and memory come from the queue entry, so the view can
  -- report what each node has left without knowing job specs.
  redis.call('HSET', KEYS[2], a.job, string.format('{"cpuMilli":%d,"memMiB":%d,"assignment":%s}',
    num(e.cpuMilli), num(e.memMiB), a.assignment))
end
-- The last change is the caller's to remember (read.lua's witness: the
-- allocation changes log is the third). The plan is never empty (Commit
-- sends none that is).
return {'ok', n, redis.call('GET', KEYS[9]) or '', last[1], '3:' .. last[2]}
