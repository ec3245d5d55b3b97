package devstacktest

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// Keys is every key of a Redis server as DUMP serialised it: what a
// replica of it held at that moment.
type Keys map[string]string

// Dump takes every key of rdb as it is now (KEYS: for test servers).
func Dump(t testing.TB, rdb redis.Cmdable) Keys {
	t.Helper()
	ctx := t.Context()
	names, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatalf("devstacktest: dump: %v", err)
	}
	out := make(Keys, len(names))
	for _, k := range names {
		d, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("devstacktest: dump %s: %v", k, err)
		}
		out[k] = d
	}
	return out
}

// PutBack makes rdb hold exactly keys again, without expiries, and nothing
// written since they were taken: what a failover to a replica that missed
// every write since Dump leaves, or a restart from a snapshot taken then.
func PutBack(t testing.TB, rdb redis.Cmdable, keys Keys) {
	t.Helper()
	ctx := t.Context()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatalf("devstacktest: put back: %v", err)
	}
	for k, d := range keys {
		if err := rdb.Restore(ctx, k, 0, d).Err(); err != nil {
			t.Fatalf("devstacktest: put back %s: %v", k, err)
		}
	}
}
