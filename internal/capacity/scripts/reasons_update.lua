-- Update the pending reasons in place, if nobody else wrote them since the
-- caller did (see reasons.go): P:reasons-stamp still holds the stamp the
-- caller wrote with them last.
-- KEYS: reasons, reasons-stamp
-- ARGV: the caller's last stamp, its new stamp, n, then n pairs of job ID
--       and Waiting JSON to set, then the job IDs whose reasons go
-- Returns 1 if written, 0 (nothing written) if the stamp is not the
-- caller's.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
local n = tonumber(ARGV[3])
for i = 4, 3 + 2 * n, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
for i = 4 + 2 * n, #ARGV do
  redis.call('HDEL', KEYS[1], ARGV[i])
end
redis.call('SET', KEYS[2], ARGV[2])
return 1
