package capacity

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/internal/transport"
)

// t0 is the fixed time tests start from.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const leader = "dispatch-a"

// startRedis starts a real redis-server for the test and returns a client;
// with GANGWAY_TEST_REDIS_CLUSTER=1 a Redis Cluster of three masters and
// a cluster client instead, through the URL a server would be given.
func startRedis(t testing.TB) redis.UniversalClient {
	t.Helper()
	if onCluster != nil {
		return onCluster
	}
	if os.Getenv("GANGWAY_TEST_REDIS_CLUSTER") == "1" {
		return startCluster(t)
	}
	r := devstacktest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// onCluster, while TestViewOnRedisCluster runs, is the cluster every
// startRedis returns.
var onCluster redis.UniversalClient

// startCluster starts a Redis Cluster of three masters and returns a
// client of it, made from a cluster URL as a server's config gives it.
func startCluster(t testing.TB) redis.UniversalClient {
	t.Helper()
	addrs := devstacktest.RedisCluster(t, 3)
	rdb, err := transport.Redis{URL: "redis://" + addrs[0] + "?cluster=true&addr=" + addrs[1] + "&addr=" + addrs[2]}.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

var prefixSeq atomic.Int64

// newView returns a View under a fresh prefix, so test cases sharing one
// server never see each other's keys.
func newView(rdb redis.UniversalClient, opts Options) *View {
	opts.Prefix = fmt.Sprintf("{test-%d}", prefixSeq.Add(1))
	return New(rdb, opts)
}

// node is a ready-to-register node with gpus H100s indexed from 0.
func node(id string, gpus int) gangway.Node {
	n := gangway.Node{ID: id, Addr: id + ".local:29500", Pool: "onprem", CPUMilli: 64000, MemMiB: 512 * 1024}
	for i := range gpus {
		n.GPUs = append(n.GPUs, gangway.GPU{
			Index: i, UUID: fmt.Sprintf("GPU-%s-%d", id, i), Model: "H100", MemMiB: 81559, Healthy: true,
		})
	}
	return n
}

// entry is a queue entry for replicas × gpusPer GPUs, 4 CPUs and 16 GiB per
// replica, submitted at t0.
func entry(job string, attempt, replicas, gpusPer int) gangway.QueueEntry {
	return gangway.QueueEntry{
		JobID: job, Team: "ml", PriorityClass: gangway.PriorityNormal, Priority: 100,
		Attempt: attempt, Replicas: replicas, GPUsPerReplica: gpusPer,
		CPUMilli: 4000, MemMiB: 16384, SubmittedAt: t0, EnqueuedAt: t0,
	}
}

func assign(job string, attempt int, members ...gangway.Member) gangway.Assignment {
	return gangway.Assignment{JobID: job, Attempt: attempt, Members: members, At: t0}
}

func member(rank int, nodeID string, gpus ...int) gangway.Member {
	return gangway.Member{Rank: rank, NodeID: nodeID, Pool: "onprem", GPUs: gpus}
}

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// must fails the test on err; for setup steps that are not under test.
func must(t tb, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// world builds a view with registered nodes, queued entries and the lease
// held by leader.
func world(t *testing.T, rdb redis.UniversalClient, nodes []gangway.Node, queue ...gangway.QueueEntry) *View {
	t.Helper()
	ctx := t.Context()
	v := newView(rdb, Options{})
	for _, n := range nodes {
		must(t, v.RegisterNode(ctx, n))
	}
	for _, e := range queue {
		ok, err := v.Enqueue(ctx, e)
		must(t, err)
		if !ok {
			t.Fatalf("enqueue %s: ignored", e.JobID)
		}
	}
	ok, err := v.AcquireLease(ctx, leader, time.Minute)
	must(t, err)
	if !ok {
		t.Fatal("acquire lease: not acquired")
	}
	return v
}

// dump is every key of the view, raw, for "nothing was written" checks.
type dump map[string]any

func dumpView(t tb, ctx context.Context, v *View) dump {
	t.Helper()
	d := dump{}
	for _, k := range []string{v.k.nodes, v.k.nodeState, v.k.heartbeat, v.k.gpus, v.k.queue, v.k.allocs, v.k.reasons, v.k.bursting} {
		m, err := v.rdb.HGetAll(ctx, k).Result()
		must(t, err)
		d[k] = m
	}
	h, err := v.LeaseHolder(ctx)
	must(t, err)
	d[v.k.lease] = h
	return d
}

// parseGPUField splits a P:gpus field at its last slash, so node IDs may
// themselves contain slashes.
func parseGPUField(f string) (nodeID string, index int, err error) {
	i := strings.LastIndexByte(f, '/')
	if i < 0 {
		return "", 0, fmt.Errorf("bad gpu field %q", f)
	}
	index, err = strconv.Atoi(f[i+1:])
	if err != nil {
		return "", 0, fmt.Errorf("bad gpu field %q: %w", f, err)
	}
	return f[:i], index, nil
}
