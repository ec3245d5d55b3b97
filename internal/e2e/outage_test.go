package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// temporalOutage is how long the Temporal dev server stays down: five
// times the tasks' heartbeat timeout, so every running task's heartbeats
// time out.
const temporalOutage = 15 * time.Second

// TestTemporalOutageOnRealServers SIGKILLs the Temporal dev server under
// running jobs and starts it again on the same database file 15 s later.
// The agents keep running the tasks meanwhile; no node is called lost. A
// 2 × 4 gang still running when Temporal returns is picked up by its
// workflow and finishes; a job that exited 0 during the outage ends
// Succeeded and one that exited 3 ends Failed with that exit code — each
// in its first attempt, every member started exactly once, no GPU held
// twice, and nothing left allocated.
func TestTemporalOutageOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "stack.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	rec := &record{}
	st, err := fullstack.Start(ctx, fullstack.Options{
		Dir: dir, Headless: true, Log: slog.New(slog.NewTextHandler(logf, nil)),
		Nodes:  agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 3, GPUs: 4, Model: "H100"}}),
		Agent:  agent.Config{HeartbeatInterval: 500 * time.Millisecond, Recorder: rec},
		Server: &fullstack.ServerOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer func() {
		if t.Failed() {
			data, _ := os.ReadFile(logf.Name())
			t.Logf("stack log:\n%s", tail(string(data), 8000))
		}
	}()
	cl := client.New(jobs.New(st.TemporalClient), st.View)
	timing := client.SubmitOptions{Timing: workflows.Timing{HeartbeatTimeout: 3 * time.Second, StartTimeout: 30 * time.Second}}
	sh := func(name string, replicas, gpus int, script string) gangway.JobSpec {
		return gangway.JobSpec{Name: name, Team: "ml", Command: []string{"/bin/sh", "-c", script},
			Gang: gangway.Gang{Replicas: replicas, GPUsPerReplica: gpus}}
	}
	specs := []gangway.JobSpec{
		sh("long-gang", 2, 4, "sleep 45"),       // runs on after Temporal returns
		sh("done-ok", 1, 2, "sleep 5"),          // exits 0 during the outage
		sh("done-bad", 1, 2, "sleep 5; exit 3"), // exits 3 during the outage
	}
	for _, s := range specs {
		if _, err := cl.Submit(ctx, s, timing); err != nil {
			t.Fatalf("submit %s: %v", s.Name, err)
		}
	}
	waitFor(t, ctx, "every member running", func() bool {
		n := 0
		for _, node := range []string{"node-0", "node-1", "node-2"} {
			n += rec.running(node)
		}
		return n == 4
	})

	t.Logf("killing the Temporal dev server (pid %d) for %s", st.Temporal.Pid(), temporalOutage)
	if err := st.Temporal.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(temporalOutage)
	if err := st.Temporal.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Log("Temporal is back on the same database file")

	want := map[string]struct {
		phase  gangway.Phase
		reason string
	}{
		"long-gang": {gangway.PhaseSucceeded, "all members exited 0"},
		"done-ok":   {gangway.PhaseSucceeded, "all members exited 0"},
		"done-bad":  {gangway.PhaseFailed, "exit code 3"},
	}
	for _, s := range specs {
		res, err := cl.Result(ctx, s.Name)
		if err != nil {
			t.Fatalf("result of %s: %v", s.Name, err)
		}
		w := want[s.Name]
		if res.Phase != w.phase || !strings.Contains(res.Reason, w.reason) || res.Attempt != 1 || res.InfraRestarts != 0 {
			t.Errorf("%s ended %s at attempt %d after %d infrastructure restarts: %q; want %s in attempt 1, reason with %q",
				s.Name, res.Phase, res.Attempt, res.InfraRestarts, res.Reason, w.phase, w.reason)
		}
	}
	starts := rec.checkNoDoubleBooking(t)
	perTask := map[string]int{}
	rec.mu.Lock()
	for _, e := range rec.events {
		if e.Start {
			perTask[fmt.Sprintf("%s/%d/%d", e.JobID, e.Attempt, e.Rank)]++
		}
	}
	rec.mu.Unlock()
	for task, n := range perTask {
		if n != 1 {
			t.Errorf("task %s started %d times", task, n)
		}
	}
	if starts != 4 {
		t.Errorf("the agents started %d tasks, want the 4 members once each", starts)
	}
	if allocs := mustAllocations(t, ctx, st.View); len(allocs) != 0 {
		t.Errorf("allocations left: %+v", allocs)
	}
	if *updateHistories {
		// A gang whose members were adopted after the outage, and one
		// whose member ended during it.
		saveHistory(t, ctx, st.TemporalClient, "long-gang")
		saveHistory(t, ctx, st.TemporalClient, "done-bad")
	}
	data, _ := os.ReadFile(logf.Name())
	adopted, orphaned := strings.Count(string(data), "adopted a"), strings.Count(string(data), "Temporal lost track of a running task")
	if orphaned == 0 {
		t.Errorf("no agent saw Temporal lose track of a task: the outage did not reach the tasks")
	}
	t.Logf("%d tasks started, each once; every job ended in its first attempt; %d tasks orphaned by the outage, %d adoptions",
		starts, orphaned, adopted)
}

// redisOutage is how long redis-server is stopped: long enough that a job
// submitted into it — whose submit spends about 10 s finding the view
// does not answer — then meets more than the 10 s a server-side
// activity's one try may take, and far longer than the agents' heartbeats
// may be late before their node is called lost.
const redisOutage = 30 * time.Second

// TestRedisOutageOnRealServers SIGSTOPs redis-server — up, but answering
// nothing, as a hung or partitioned Redis is — for 30 s under running
// jobs, and SIGCONTs it. A gang running across the outage finishes; a job
// that exits during it is released and billed once Redis answers; a job
// submitted during it is accepted (with a warning that it was not checked
// against the fleet), queued when Redis answers, and runs. Each ends
// Succeeded in its first attempt, every member started once, no GPU held
// twice, nothing left allocated, and the ledger agrees with every job.
func TestRedisOutageOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "stack.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	rec := &record{}
	st, err := fullstack.Start(ctx, fullstack.Options{
		Dir: dir, Headless: true, Log: slog.New(slog.NewTextHandler(logf, nil)),
		Nodes:  agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 3, GPUs: 4, Model: "H100"}}),
		Agent:  agent.Config{HeartbeatInterval: 500 * time.Millisecond, Recorder: rec},
		Server: &fullstack.ServerOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer func() {
		if t.Failed() {
			data, _ := os.ReadFile(logf.Name())
			t.Logf("stack log:\n%s", tail(string(data), 8000))
		}
	}()
	cl := client.New(jobs.New(st.TemporalClient), st.View)
	timing := client.SubmitOptions{Timing: workflows.Timing{HeartbeatTimeout: 3 * time.Second, StartTimeout: 30 * time.Second}}
	sh := func(name string, replicas, gpus int, script string) gangway.JobSpec {
		return gangway.JobSpec{Name: name, Team: "ml", Command: []string{"/bin/sh", "-c", script},
			Gang: gangway.Gang{Replicas: replicas, GPUsPerReplica: gpus}}
	}
	before := []gangway.JobSpec{
		sh("across", 2, 4, "sleep 45"), // runs on after Redis answers again
		sh("ends-during", 1, 2, "sleep 6"),
	}
	for _, s := range before {
		if _, err := cl.Submit(ctx, s, timing); err != nil {
			t.Fatalf("submit %s: %v", s.Name, err)
		}
	}
	waitFor(t, ctx, "every member running", func() bool {
		n := 0
		for _, node := range []string{"node-0", "node-1", "node-2"} {
			n += rec.running(node)
		}
		return n == 3
	})

	t.Logf("stopping redis-server (pid %d) for %s", st.Redis.Pid(), redisOutage)
	if err := syscall.Kill(st.Redis.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(st.Redis.Pid(), syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	late := sh("submitted-during", 1, 2, "sleep 1")
	var warnings []string
	submitOpts := timing
	submitOpts.Warn = func(msg string) { warnings = append(warnings, msg) }
	if _, err := cl.Submit(ctx, late, submitOpts); err != nil {
		t.Fatalf("submit %s while Redis is stopped: %v", late.Name, err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "not checked against the fleet") {
		t.Errorf("submit while Redis is stopped warned %q, want that the fleet was not checked", warnings)
	}
	time.Sleep(time.Until(stopped.Add(redisOutage)))
	resume()
	t.Log("redis-server answers again")

	all := append(before, late)
	succeeded, billed := 0, 0
	for _, s := range all {
		res, err := cl.Result(ctx, s.Name)
		if err != nil {
			t.Fatalf("result of %s: %v", s.Name, err)
		}
		if res.Phase != gangway.PhaseSucceeded || res.Attempt != 1 || res.InfraRestarts != 0 {
			t.Errorf("%s ended %s at attempt %d after %d infrastructure restarts: %q; want Succeeded in attempt 1",
				s.Name, res.Phase, res.Attempt, res.InfraRestarts, res.Reason)
		} else {
			succeeded++
		}
		if why := ledgerMismatch(ctx, st.Ledger, s.Name, res); why != "" {
			t.Errorf("%s: the ledger disagrees with the job: %s", s.Name, why)
		} else {
			billed++
		}
	}
	starts := rec.checkNoDoubleBooking(t)
	if starts != 4 {
		t.Errorf("the agents started %d tasks, want the 4 members once each", starts)
	}
	waitFor(t, ctx, "nothing left allocated", func() bool {
		allocs, err := st.View.Allocations(ctx)
		return err == nil && len(allocs) == 0
	})
	t.Logf("across a %s Redis outage: %d of %d jobs Succeeded in their first attempt, %d billed as they ran; %d tasks started",
		redisOutage, succeeded, len(all), billed, starts)
}

// ledgerOutage is how long PostgreSQL is stopped: longer than the 10 s a
// RecordUsage try may take.
const ledgerOutage = 25 * time.Second

// TestLedgerOutageOnRealServers SIGSTOPs the PostgreSQL ledger's server
// (the postmaster and every backend: up, answering nothing) for 25 s under running
// jobs. A job that ends during the outage is billed once the ledger
// answers; one submitted during it is placed and runs meanwhile — placing
// on-prem GPUs does not wait on the ledger; every job ends Succeeded in
// its first attempt and the ledger agrees with each.
func TestLedgerOutageOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	pg := devstacktest.Postgres(t)
	if err := pg.CreateDatabase(ctx, "gangway"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "stack.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	rec := &record{}
	st, err := fullstack.Start(ctx, fullstack.Options{
		Dir: dir, Headless: true, Log: slog.New(slog.NewTextHandler(logf, nil)), LedgerDSN: pg.URL("gangway"),
		Nodes:  agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 3, GPUs: 4, Model: "H100"}}),
		Agent:  agent.Config{HeartbeatInterval: 500 * time.Millisecond, Recorder: rec},
		Server: &fullstack.ServerOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer func() {
		if t.Failed() {
			data, _ := os.ReadFile(logf.Name())
			t.Logf("stack log:\n%s", tail(string(data), 8000))
		}
	}()
	cl := client.New(jobs.New(st.TemporalClient), st.View)
	timing := client.SubmitOptions{Timing: workflows.Timing{HeartbeatTimeout: 3 * time.Second, StartTimeout: 30 * time.Second}}
	sh := func(name string, replicas, gpus int, script string) gangway.JobSpec {
		return gangway.JobSpec{Name: name, Team: "ml", Command: []string{"/bin/sh", "-c", script},
			Gang: gangway.Gang{Replicas: replicas, GPUsPerReplica: gpus}}
	}
	before := []gangway.JobSpec{
		sh("across", 2, 4, "sleep 35"),
		sh("ends-during", 1, 2, "sleep 5"),
	}
	for _, s := range before {
		if _, err := cl.Submit(ctx, s, timing); err != nil {
			t.Fatalf("submit %s: %v", s.Name, err)
		}
	}
	waitFor(t, ctx, "every member running", func() bool {
		n := 0
		for _, node := range []string{"node-0", "node-1", "node-2"} {
			n += rec.running(node)
		}
		return n == 3
	})

	// Each backend of PostgreSQL is a session of its own (setsid), so the
	// postmaster's process group is only the postmaster: stop it first,
	// so that it forks no more, then every process it started.
	procs := append([]int{pg.Pid()}, childrenOf(t, pg.Pid())...)
	t.Logf("stopping PostgreSQL (%d processes) for %s", len(procs), ledgerOutage)
	for _, pid := range procs {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			for _, pid := range procs {
				if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
					t.Error(err)
				}
			}
		}
	}
	defer resume()
	// The outage is real: the ledger does not answer.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	_, perr := st.Ledger.PerJob(pctx, "across")
	pcancel()
	if perr == nil {
		t.Fatal("the ledger answered while PostgreSQL was stopped")
	}
	late := sh("submitted-during", 1, 2, "sleep 1")
	if _, err := cl.Submit(ctx, late, timing); err != nil {
		t.Fatalf("submit %s while the ledger is stopped: %v", late.Name, err)
	}
	waitFor(t, ctx, late.Name+" started", func() bool { return rec.started(late.Name) })
	if waited := time.Since(stopped); waited > ledgerOutage {
		t.Fatalf("%s was placed only after %s, once the ledger was back", late.Name, waited)
	}
	time.Sleep(time.Until(stopped.Add(ledgerOutage)))
	resume()
	t.Log("PostgreSQL answers again")

	all := append(before, late)
	succeeded, billed := 0, 0
	for _, s := range all {
		res, err := cl.Result(ctx, s.Name)
		if err != nil {
			t.Fatalf("result of %s: %v", s.Name, err)
		}
		if res.Phase != gangway.PhaseSucceeded || res.Attempt != 1 || res.InfraRestarts != 0 {
			t.Errorf("%s ended %s at attempt %d after %d infrastructure restarts: %q; want Succeeded in attempt 1",
				s.Name, res.Phase, res.Attempt, res.InfraRestarts, res.Reason)
		} else {
			succeeded++
		}
		if why := ledgerMismatch(ctx, st.Ledger, s.Name, res); why != "" {
			t.Errorf("%s: the ledger disagrees with the job: %s", s.Name, why)
		} else {
			billed++
		}
	}
	starts := rec.checkNoDoubleBooking(t)
	if starts != 4 {
		t.Errorf("the agents started %d tasks, want the 4 members once each", starts)
	}
	t.Logf("across a %s ledger outage: %d of %d jobs Succeeded in their first attempt, %d billed as they ran; %d tasks started, %s's during the outage",
		ledgerOutage, succeeded, len(all), billed, starts, late.Name)
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
