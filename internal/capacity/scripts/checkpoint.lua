-- Record that a running job saved a checkpoint: keep the newest, by
-- attempt then time, so a late report from an older attempt or an older
-- save never replaces a newer one.
-- KEYS: checkpoints
-- ARGV: job ID, attempt, time (unix ms)
-- The value is "<attempt>:<unix ms>". Returns 1 if recorded, 0 if older.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local a, t = string.match(cur, '^(%d+):(%d+)$')
  a, t = tonumber(a), tonumber(t)
  local na, nt = tonumber(ARGV[2]), tonumber(ARGV[3])
  if a and t and (a > na or (a == na and t >= nt)) then
    return 0
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. ARGV[3])
return 1
