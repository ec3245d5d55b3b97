-- Give up the dispatch lease, only if the caller holds it.
-- KEYS: lease
-- ARGV: holder
-- Returns 1 if released, 0 if the caller did not hold it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
