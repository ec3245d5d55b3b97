-- SET a key only the dispatch leader writes (what it learned, its
-- defragmentations), only if the caller holds the dispatch lease: a
-- leader that lost it must not overwrite what the one after it wrote.
-- KEYS: lease, the key
-- ARGV: holder, the value
-- Returns 1 if set, 0 if the caller does not hold the lease.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2])
return 1
