-- Mark the view rebuilt for its generation: from now on the dispatch loop
-- places jobs again.
-- KEYS: lease, epoch, rebuilt
-- ARGV: lease holder, generation (epoch)
-- Returns "ok", "not-leader" or "stale" (the generation changed again).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 'not-leader'
end
if redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return 'stale'
end
redis.call('SET', KEYS[3], ARGV[2])
return 'ok'
