package dispatch

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

// BenchmarkCycle runs whole dispatch cycles (snapshot, place, explain,
// forecast, commit, reasons, metrics) against a real redis-server, in the
// shape `gangway bench --nodes N --pending N` gives the server: N nodes of
// 8 H100s ready in one pool, and N one-GPU jobs kept waiting in a pool
// whose only node is cordoned. The server's default placement options;
// the forecast on, as in the server.
//
//   - idle: nothing changes between cycles;
//   - submit: one more one-GPU job for the ready pool is queued before
//     each cycle, which places and commits it (what a submit does);
//   - busy/submit: submit on a fleet whose every node runs a 7-GPU job
//     (its allocation committed before the first cycle), one GPU free.
//
// Besides the mean (ns/op) it reports the median and 99th percentile
// cycle (p50-ms, p99-ms): forecasts and whole rewrites of the reasons
// make some cycles slower than the rest. With the forecast in the
// background (the wall clock), its CPU competes with the cycles. The CPU
// per cycle of this process (cpu-ms/op: the loop, its forecasts, the
// garbage collector, and the submit mode's queueing) and of redis-server
// (redis-cpu-ms/op) move much less with the machine's load than the wall
// times do.
func BenchmarkCycle(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, submit := range []bool{false, true} {
			name := fmt.Sprintf("nodes=%d/pending=%d/idle", n, n)
			if submit {
				name = fmt.Sprintf("nodes=%d/pending=%d/submit", n, n)
			}
			b.Run(name, func(b *testing.B) { benchCycle(b, n, n, submit, false) })
		}
		b.Run(fmt.Sprintf("nodes=%d/pending=%d/busy/submit", n, n), func(b *testing.B) { benchCycle(b, n, n, true, true) })
	}
}

func benchCycle(b *testing.B, nodes, pending int, submit, busy bool) {
	ctx := b.Context()
	r := devstacktest.Redis(b)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	b.Cleanup(func() { _ = rdb.Close() })
	view := capacity.New(rdb, capacity.Options{Prefix: "{bench}"})
	fleet := append(agent.FakeFleet("sim", "bench", []agent.NodeShape{{Count: nodes, GPUs: 8, Model: "H100"}}),
		agent.FakeFleet("held", "held", []agent.NodeShape{{Count: 1, GPUs: 8, Model: "H100"}})...)
	for _, n := range fleet {
		if err := view.RegisterNode(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	if err := view.SetNodeState(ctx, "held-0", gangway.NodeCordoned); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	spec := func(name, pool string) gangway.QueueEntry {
		s := gangway.JobSpec{Name: name, Team: "bench", Command: []string{"sleep", "0.1"}, Pools: []string{pool},
			Gang: gangway.Gang{Replicas: 1, GPUsPerReplica: 1}}
		s.Default()
		return s.QueueEntry(1, now, now)
	}
	for i := range pending {
		if _, err := view.Enqueue(ctx, spec(fmt.Sprintf("pending-%06d", i), "held")); err != nil {
			b.Fatal(err)
		}
	}
	// The view is new: mark it rebuilt (a server would wait a node TTL
	// for the agents' heartbeats first).
	if ok, err := view.AcquireLease(ctx, "bench", time.Hour); err != nil || !ok {
		b.Fatalf("lease: %v %v", ok, err)
	}
	snap, err := view.Snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := view.MarkRebuilt(ctx, "bench", snap.Generation); err != nil {
		b.Fatal(err)
	}
	if busy {
		var plan []gangway.Assignment
		for i, n := range fleet[:nodes] {
			e := spec(fmt.Sprintf("running-%06d", i), "bench")
			e.GPUsPerReplica = 7
			if _, err := view.Enqueue(ctx, e); err != nil {
				b.Fatal(err)
			}
			plan = append(plan, gangway.Assignment{JobID: e.JobID, Attempt: e.Attempt, At: now,
				Members: []gangway.Member{{NodeID: n.ID, Pool: n.Pool, GPUs: []int{0, 1, 2, 3, 4, 5, 6}}}})
			if len(plan) == 500 || i == nodes-1 {
				if err := view.Commit(ctx, "bench", plan); err != nil {
					b.Fatal(err)
				}
				plan = nil
			}
		}
	}
	// The server's default placement options (internal/config, which
	// imports this package).
	scorer, err := baselines.ScorerByName("gangway")
	if err != nil {
		b.Fatal(err)
	}
	popts := placement.Options{Scorer: scorer, Reservations: 4, Preempt: true, MinRuntime: 10 * time.Minute}
	reg := prometheus.NewRegistry()
	// A NodeTTL beyond the benchmark: the nodes registered once and do
	// not heartbeat.
	l := New(Config{Holder: "bench", LeaseTTL: time.Hour, NodeTTL: 24 * time.Hour, Placement: popts,
		Metrics: metrics.New(reg), RunMetrics: metrics.NewLifecycle(reg)}, view, &fakeWorkflows{})
	if err := l.Tick(ctx); err != nil { // takes the lease; the first, whole read
		b.Fatal(err)
	}
	var took []time.Duration
	cpuBefore, redisBefore := selfCPU(b), procCPU(b, r.Pid())
	i := 0
	for b.Loop() {
		if submit {
			b.StopTimer()
			if _, err := view.Enqueue(ctx, spec(fmt.Sprintf("submit-%06d", i), "bench")); err != nil {
				b.Fatal(err)
			}
			i++
			b.StartTimer()
		}
		start := time.Now()
		res, err := l.Cycle(ctx)
		took = append(took, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if want := pending; res.Unplaced != want || (submit && res.Placed != 1) {
			b.Fatalf("cycle: %+v, want %d unplaced and %d placed", res, want, btoi(submit))
		}
	}
	// The target is on the slow cycles: report the median and the
	// slowest but one in a hundred as well as the mean.
	n := float64(len(took))
	b.ReportMetric((selfCPU(b)-cpuBefore).Seconds()*1000/n, "cpu-ms/op")
	b.ReportMetric((procCPU(b, r.Pid())-redisBefore).Seconds()*1000/n, "redis-cpu-ms/op")
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[(len(took)*99)/100].Microseconds())/1000, "p99-ms")
}

// selfCPU is the CPU time this process has used, user and system: the
// cycles', their background forecasts' and the garbage collector's (and
// the benchmark's own queueing, outside the timer).
func selfCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// procCPU is the CPU time process pid has used, from /proc (Linux).
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's closing parenthesis: utime and
	// stime are the 12th and 13th, in clock ticks of 1/100 s.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}
