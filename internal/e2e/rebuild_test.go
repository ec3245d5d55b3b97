package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
)

// TestViewRebuildOnRealServers loses the Redis view twice under running
// and queued jobs — a FLUSHALL, then redis-server SIGKILLed and restarted
// empty — with a `gangway server` leading dispatch and a node cordoned
// through the user API, and then takes it back in time: the node is
// uncordoned and a queued job starts on it, and Redis is put back as it
// was before (what a failover to a replica that missed those writes
// leaves: the job queued, its GPUs free, the node cordoned). Each time the
// view rebuilds itself: the queued jobs are queued again, the running
// ones' allocations come back from their workflows, the cordons from the
// ledger (the lifted one lifted). The running jobs are never
// restarted, every job ends Succeeded in its first attempt (no GPU was
// refused as busy), and the agents' own record shows no GPU held by two
// tasks at once.
func TestViewRebuildOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	rec := &record{}
	for _, n := range agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 3, GPUs: 4, Model: "H100"}}) {
		s.startAgent(n, agent.Config{Recorder: rec})
	}
	waitFor(t, ctx, "3 nodes registered", func() bool {
		nodes, err := s.View.FleetNodes(ctx)
		return err == nil && len(nodes) == 3
	})
	root := s.token("root", nil, true)
	url := s.startAPIServer(ctx)
	cl, err := client.NewAPI(client.APIOptions{URL: url, Token: root, Poll: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Cordon(ctx, "node-2"); err != nil {
		t.Fatal(err)
	}
	sh := func(name string, gpus int, secs int) gangway.JobSpec {
		return gangway.JobSpec{Name: name, Team: "ml", Command: []string{"/bin/sh", "-c", fmt.Sprintf("sleep %d", secs)},
			Gang: gangway.Gang{Replicas: 1, GPUsPerReplica: gpus}}
	}
	// node-0 and node-1 are full with the two running jobs; the queued
	// ones wait for them (node-2 is cordoned).
	running := []gangway.JobSpec{sh("run-a", 4, 40), sh("run-b", 4, 40)}
	queued := []gangway.JobSpec{sh("queued-4", 4, 30), sh("queued-2", 2, 2)}
	for _, spec := range append(append([]gangway.JobSpec{}, running...), queued...) {
		if _, err := cl.Submit(ctx, spec, client.SubmitOptions{}); err != nil {
			t.Fatalf("submit %s: %v", spec.Name, err)
		}
		if spec.Name == "run-b" {
			waitFor(t, ctx, "both running jobs started", func() bool { return rec.running("node-0")+rec.running("node-1") == 2 })
		}
	}
	waitFor(t, ctx, "the other jobs queued", func() bool {
		q, err := s.View.Queue(ctx)
		return err == nil && len(q) == 2
	})

	// rebuilt waits until the view is rebuilt and checks what it holds:
	// run-a and run-b allocated, the other two queued or placed, and
	// node-2 cordoned or not.
	rebuilt := func(what string, lost time.Time, placed []string, cordons int) {
		t.Helper()
		waitFor(t, ctx, "the view rebuilt after "+what, func() bool {
			ok, err := s.View.Rebuilt(ctx)
			return err == nil && ok
		})
		took := time.Since(lost)
		allocs := mustAllocations(t, ctx, s.View)
		q, err := s.View.Queue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := s.View.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cordoned := 0
		for _, n := range nodes {
			if n.State == gangway.NodeCordoned {
				cordoned++
			}
		}
		held := map[string]bool{}
		for _, a := range allocs {
			held[a.JobID] = true
		}
		ok := len(q)+len(allocs) == 4 && cordoned == cordons
		for _, j := range placed {
			ok = ok && held[j]
		}
		if !ok {
			t.Errorf("after %s the rebuilt view holds allocations %v, queue of %d, %d cordoned nodes; want %v allocated, the others queued or placed, %d cordoned",
				what, held, len(q), cordoned, placed, cordons)
		}
		t.Logf("%s: the view was rebuilt %s later: %d allocations, %d queued, %d cordoned node", what, took.Round(100*time.Millisecond),
			len(allocs), len(q), cordoned)
	}

	lost := time.Now()
	if err := s.RedisClient.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rebuilt("FLUSHALL", lost, []string{"run-a", "run-b"}, 1)

	t.Log("killing redis-server; it starts again empty")
	if err := s.Redis.Kill(); err != nil {
		t.Fatal(err)
	}
	lost = time.Now()
	if err := s.Redis.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	rebuilt("a restart with no data", lost, []string{"run-a", "run-b"}, 1)

	older := devstacktest.Dump(t, s.RedisClient)
	epochKey := capacity.DefaultPrefix + ":epoch"
	gen, err := s.RedisClient.Get(ctx, epochKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Uncordon(ctx, "node-2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "queued-4 started on node-2", func() bool { return rec.running("node-2") == 1 })
	t.Log("putting Redis back as it was before the uncordon")
	lost = time.Now()
	devstacktest.PutBack(t, s.RedisClient, older)
	// Put back, the view is rebuilt for its generation; the leader's next
	// read finds it went back in time and begins another.
	waitFor(t, ctx, "a new generation", func() bool {
		g, err := s.RedisClient.Get(ctx, epochKey).Result()
		return err == nil && g != gen
	})
	rebuilt("going back in time", lost, []string{"run-a", "run-b", "queued-4"}, 0)

	for _, spec := range append(running, queued...) {
		res, err := cl.Result(ctx, spec.Name)
		if err != nil {
			t.Fatalf("result of %s: %v", spec.Name, err)
		}
		if res.Phase != gangway.PhaseSucceeded || res.Attempt != 1 || res.InfraRestarts != 0 {
			t.Errorf("%s ended %s at attempt %d after %d infrastructure restarts: %s; want Succeeded in attempt 1",
				spec.Name, res.Phase, res.Attempt, res.InfraRestarts, res.Reason)
		}
	}
	starts := rec.checkNoDoubleBooking(t)
	if starts != 4 {
		t.Errorf("the agents started %d tasks, want each job's once (4)", starts)
	}
	waitFor(t, ctx, "every allocation released", func() bool { return len(mustAllocations(t, ctx, s.View)) == 0 })
}
