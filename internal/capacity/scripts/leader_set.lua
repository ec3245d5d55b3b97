-- SET keys only the dispatch leader writes (what it learned, its
-- defragmentations), only if the caller holds the dispatch lease: a
-- leader that lost it must not overwrite what the one after it wrote.
-- KEYS: lease, then the keys
-- ARGV: holder, then a value for each key
-- Returns 1 if set, 0 if the caller does not hold the lease.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], ARGV[i])
end
return 1
