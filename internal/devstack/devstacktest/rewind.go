package devstacktest

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// FlushAll empties rdb: every master of a Redis Cluster (whose client
// would send FLUSHALL to one of them), or the one server.
func FlushAll(ctx context.Context, rdb redis.Cmdable) error {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FlushAll(ctx).Err() })
	}
	return rdb.FlushAll(ctx).Err()
}

// keys is every key of rdb: of every master of a Redis Cluster.
func keys(ctx context.Context, rdb redis.Cmdable) ([]string, error) {
	c, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb.Keys(ctx, "*").Result()
	}
	var mu sync.Mutex
	var out []string
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		k, err := m.Keys(ctx, "*").Result()
		mu.Lock()
		out = append(out, k...)
		mu.Unlock()
		return err
	})
	return out, err
}

// Keys is every key of a Redis server as DUMP serialised it: what a
// replica of it held at that moment.
type Keys map[string]string

// Dump takes every key of rdb as it is now (KEYS: for test servers; of a
// cluster, every master's).
func Dump(t testing.TB, rdb redis.Cmdable) Keys {
	t.Helper()
	ctx := t.Context()
	names, err := keys(ctx, rdb)
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
	if err := FlushAll(ctx, rdb); err != nil {
		t.Fatalf("devstacktest: put back: %v", err)
	}
	for k, d := range keys {
		if err := rdb.Restore(ctx, k, 0, d).Err(); err != nil {
			t.Fatalf("devstacktest: put back %s: %v", k, err)
		}
	}
}
