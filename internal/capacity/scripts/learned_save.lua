-- Store what the dispatch leader learned, only if the caller holds the
-- dispatch lease: a leader that lost it must not overwrite what the one
-- after it learned.
-- KEYS: lease, learned
-- ARGV: holder, the record's JSON
-- Returns 1 if stored, 0 if the caller does not hold the lease.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2])
return 1
