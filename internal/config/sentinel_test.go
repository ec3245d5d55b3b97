package config

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack"
)

// TestRedisSentinelFailover: a redis.url naming a Sentinel (master_name)
// dials go-redis's failover client. On a real master, its replica and a
// real `redis-server --sentinel`, the view is written through it; the
// master is killed, the Sentinel promotes the replica, and the same client
// writes to the new master.
func TestRedisSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server three times")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	start := func(o devstack.RedisOptions) *devstack.Redis {
		t.Helper()
		o.Dir = t.TempDir()
		r, err := devstack.StartRedis(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Stop() })
		return r
	}
	master := start(devstack.RedisOptions{})
	replica := start(devstack.RedisOptions{ReplicaOf: master.Addr})
	sentinel := start(devstack.RedisOptions{Sentinel: &devstack.RedisSentinel{MasterName: "gangway", Master: master.Addr}})

	rdb, err := RedisConfig{URL: "redis://" + sentinel.Addr + "/0?master_name=gangway"}.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	view := capacity.New(rdb, capacity.Options{})
	node := func(id string) gangway.Node {
		return gangway.Node{ID: id, Pool: "onprem", GPUs: []gangway.GPU{{Index: 0, Model: "H100", Healthy: true}}}
	}
	if err := view.RegisterNode(ctx, node("before")); err != nil {
		t.Fatal(err)
	}
	// The replica has the write before the master goes.
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer rc.Close()
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr})
	defer sc.Close()
	wait := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s", what)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	wait("the replica to have the write", func() bool {
		n, err := rc.HLen(ctx, capacity.DefaultPrefix+":nodes").Result()
		return err == nil && n == 1
	})
	// And the Sentinel knows the replica, so it can promote it.
	wait("the Sentinel to see the replica", func() bool {
		reps, err := sc.Replicas(ctx, "gangway").Result()
		return err == nil && len(reps) == 1
	})

	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	wait("a write through the failover client", func() bool {
		wctx, stop := context.WithTimeout(ctx, time.Second)
		defer stop()
		return view.RegisterNode(wctx, node("after")) == nil
	})
	addr, err := sc.GetMasterAddrByName(ctx, "gangway").Result()
	if err != nil || len(addr) != 2 || "127.0.0.1:"+addr[1] != replica.Addr {
		t.Errorf("the Sentinel's master is %v (%v), want the replica %s", addr, err, replica.Addr)
	}
	nodes, err := view.FleetNodes(ctx)
	if err != nil || len(nodes) != 2 {
		t.Errorf("fleet after the failover: %d nodes (%v), want before and after", len(nodes), err)
	}
	t.Logf("failed over to %s; writes went through again %s after the master was killed", replica.Addr, time.Since(began).Round(100*time.Millisecond))
}
