package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	ctx := outageContext(t)
	o := startOutageStack(t, ctx, "")
	st, rec, cl := o.Stack, o.rec, o.cl
	specs := []gangway.JobSpec{
		shJob("long-gang", 2, 4, "sleep 45"),       // runs on after Temporal returns
		shJob("done-ok", 1, 2, "sleep 5"),          // exits 0 during the outage
		shJob("done-bad", 1, 2, "sleep 5; exit 3"), // exits 3 during the outage
	}
	o.submitAll(ctx, specs)
	o.waitRunning(ctx, 4)

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
	data, _ := os.ReadFile(o.logPath)
	adopted, orphaned := strings.Count(string(data), "adopted a"), strings.Count(string(data), "Temporal lost track of a running task")
	if orphaned == 0 {
		t.Errorf("no agent saw Temporal lose track of a task: the outage did not reach the tasks")
	}
	t.Logf("%d tasks started, each once; every job ended in its first attempt; %d tasks orphaned by the outage, %d adoptions",
		starts, orphaned, adopted)
}

// redisOutage is how long redis-server is stopped: long enough that a job
// submitted into it — whose submit spends about 10 s finding the view
// does not answer — then meets more than the 20 s a server-side activity
// is tried as a local activity before it moves to the server task queue,
// and far longer than the agents' heartbeats may be late before their
// node is called lost.
const redisOutage = 45 * time.Second

// TestRedisOutageOnRealServers SIGSTOPs redis-server — up, but answering
// nothing, as a hung or partitioned Redis is — for 45 s under running
// jobs, and SIGCONTs it. A gang running across the outage finishes; a job
// that exits during it is released and billed once Redis answers; a job
// submitted during it is accepted (with a warning that it was not checked
// against the fleet), answers `gangway status` while Redis is still
// stopped, is queued when Redis answers, and runs. Each ends
// Succeeded in its first attempt, every member started once, no GPU held
// twice, nothing left allocated, and the ledger agrees with every job.
func TestRedisOutageOnRealServers(t *testing.T) {
	ctx := outageContext(t)
	o := startOutageStack(t, ctx, "")
	st, rec, cl := o.Stack, o.rec, o.cl
	before := []gangway.JobSpec{
		shJob("across", 2, 4, "sleep 60"), // runs on after Redis answers again
		shJob("ends-during", 1, 2, "sleep 6"),
	}
	o.submitAll(ctx, before)
	o.waitRunning(ctx, 3)

	t.Logf("stopping redis-server (pid %d) for %s", st.Redis.Pid(), redisOutage)
	resume := pause(t, st.Redis.Pid())
	stopped := time.Now()
	late := shJob("submitted-during", 1, 2, "sleep 1")
	var warnings []string
	submitOpts := outageTiming
	submitOpts.Warn = func(msg string) { warnings = append(warnings, msg) }
	if _, err := cl.Submit(ctx, late, submitOpts); err != nil {
		t.Fatalf("submit %s while Redis is stopped: %v", late.Name, err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "not checked against the fleet") {
		t.Errorf("submit while Redis is stopped warned %q, want that the fleet was not checked", warnings)
	}
	// Its Enqueue cannot reach Redis: once it has moved off the workflow
	// task, the job answers `gangway status` while Redis is still stopped.
	submitted, answered := time.Now(), time.Duration(-1)
	for answered < 0 && time.Until(stopped.Add(redisOutage)) > 3*time.Second {
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := cl.Status(qctx, late.Name)
		cancel()
		if err == nil {
			answered = time.Since(submitted)
		} else {
			time.Sleep(500 * time.Millisecond)
		}
	}
	if answered < 0 {
		t.Errorf("%s's status went unanswered for the rest of the outage (%s after its submit)", late.Name, time.Since(submitted).Round(time.Second))
	}
	time.Sleep(time.Until(stopped.Add(redisOutage)))
	resume()
	t.Log("redis-server answers again")

	all := append(before, late)
	succeeded, billed := o.checkSucceededAndBilled(ctx, all)
	starts := rec.checkNoDoubleBooking(t)
	if starts != 4 {
		t.Errorf("the agents started %d tasks, want the 4 members once each", starts)
	}
	waitFor(t, ctx, "nothing left allocated", func() bool {
		allocs, err := st.View.Allocations(ctx)
		return err == nil && len(allocs) == 0
	})
	events := make([]string, 0, len(all))
	for _, s := range all {
		d, err := st.TemporalClient.DescribeWorkflowExecution(ctx, s.Name, "")
		if err != nil {
			t.Fatalf("describe %s: %v", s.Name, err)
		}
		events = append(events, fmt.Sprintf("%s %d", s.Name, d.GetWorkflowExecutionInfo().GetHistoryLength()))
	}
	t.Logf("across a %s Redis outage: %d of %d jobs Succeeded in their first attempt, %d billed as they ran; %d tasks started; %s's status answered %s after its submit; history events: %s",
		redisOutage, succeeded, len(all), billed, starts, late.Name, after(answered), strings.Join(events, ", "))
}

// after is d, rounded, or "never" for a negative one.
func after(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.Round(100 * time.Millisecond).String()
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
	ctx := outageContext(t)
	pg := devstacktest.Postgres(t)
	if err := pg.CreateDatabase(ctx, "gangway"); err != nil {
		t.Fatal(err)
	}
	o := startOutageStack(t, ctx, pg.URL("gangway"))
	st, rec, cl := o.Stack, o.rec, o.cl
	before := []gangway.JobSpec{
		shJob("across", 2, 4, "sleep 35"),
		shJob("ends-during", 1, 2, "sleep 5"),
	}
	o.submitAll(ctx, before)
	o.waitRunning(ctx, 3)

	// Each backend of PostgreSQL is a session of its own (setsid), so the
	// postmaster's process group is only the postmaster: stop it first,
	// so that it forks no more, then every process it started.
	procs := append([]int{pg.Pid()}, childrenOf(t, pg.Pid())...)
	t.Logf("stopping PostgreSQL (%d processes) for %s", len(procs), ledgerOutage)
	resume := pause(t, procs...)
	stopped := time.Now()
	// The outage is real: the ledger does not answer.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	_, perr := st.Ledger.PerJob(pctx, "across")
	pcancel()
	if perr == nil {
		t.Fatal("the ledger answered while PostgreSQL was stopped")
	}
	late := shJob("submitted-during", 1, 2, "sleep 1")
	if _, err := cl.Submit(ctx, late, outageTiming); err != nil {
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
	succeeded, billed := o.checkSucceededAndBilled(ctx, all)
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

// outageStack is the outage tests' stack: three 4-GPU nodes, a server, the
// agents' task record, and a client.
type outageStack struct {
	*fullstack.Stack
	rec     *record
	cl      *client.Client
	logPath string
	t       *testing.T
}

// outageContext skips the test under -short and bounds it to 4 minutes.
func outageContext(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// outageTiming times the outage tests' jobs: heartbeats time out in 3 s.
var outageTiming = client.SubmitOptions{Timing: workflows.Timing{HeartbeatTimeout: 3 * time.Second, StartTimeout: 30 * time.Second}}

// startOutageStack starts the stack, its ledger at ledgerDSN ("" for the
// default SQLite file), and stops it when the test ends, showing its log
// if the test failed.
func startOutageStack(t *testing.T, ctx context.Context, ledgerDSN string) *outageStack {
	t.Helper()
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "stack.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	rec := &record{}
	st, err := fullstack.Start(ctx, fullstack.Options{
		Dir: dir, Headless: true, Log: slog.New(slog.NewTextHandler(logf, nil)), LedgerDSN: ledgerDSN,
		Nodes:  agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 3, GPUs: 4, Model: "H100"}}),
		Agent:  agent.Config{HeartbeatInterval: 500 * time.Millisecond, Recorder: rec},
		Server: &fullstack.ServerOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(logf.Name())
			t.Logf("stack log:\n%s", tail(string(data), 8000))
		}
		st.Close()
	})
	return &outageStack{Stack: st, rec: rec, cl: client.New(jobs.New(st.TemporalClient), st.View), logPath: logf.Name(), t: t}
}

// shJob is a job of team ml running script under /bin/sh.
func shJob(name string, replicas, gpus int, script string) gangway.JobSpec {
	return gangway.JobSpec{Name: name, Team: "ml", Command: []string{"/bin/sh", "-c", script},
		Gang: gangway.Gang{Replicas: replicas, GPUsPerReplica: gpus}}
}

// checkSucceededAndBilled checks that every job ended Succeeded in its
// first attempt and that the ledger agrees with each, and counts both.
func (o *outageStack) checkSucceededAndBilled(ctx context.Context, specs []gangway.JobSpec) (succeeded, billed int) {
	t := o.t
	t.Helper()
	for _, s := range specs {
		res, err := o.cl.Result(ctx, s.Name)
		if err != nil {
			t.Fatalf("result of %s: %v", s.Name, err)
		}
		if res.Phase != gangway.PhaseSucceeded || res.Attempt != 1 || res.InfraRestarts != 0 {
			t.Errorf("%s ended %s at attempt %d after %d infrastructure restarts: %q; want Succeeded in attempt 1",
				s.Name, res.Phase, res.Attempt, res.InfraRestarts, res.Reason)
		} else {
			succeeded++
		}
		if why := ledgerMismatch(ctx, o.Ledger, s.Name, res); why != "" {
			t.Errorf("%s: the ledger disagrees with the job: %s", s.Name, why)
		} else {
			billed++
		}
	}
	return succeeded, billed
}

// submitAll submits the jobs, failing the test if one is refused.
func (o *outageStack) submitAll(ctx context.Context, specs []gangway.JobSpec) {
	o.t.Helper()
	for _, s := range specs {
		if _, err := o.cl.Submit(ctx, s, outageTiming); err != nil {
			o.t.Fatalf("submit %s: %v", s.Name, err)
		}
	}
}

// waitRunning waits until n tasks run on the stack's nodes.
func (o *outageStack) waitRunning(ctx context.Context, n int) {
	o.t.Helper()
	waitFor(o.t, ctx, "every member running", func() bool {
		k := 0
		for _, node := range []string{"node-0", "node-1", "node-2"} {
			k += o.rec.running(node)
		}
		return k == n
	})
}

// pause SIGSTOPs the processes, in order, and returns what SIGCONTs them;
// calling it again does nothing, and the test's end calls it (before the
// stack stops) if the test has not.
func pause(t *testing.T, pids ...int) (resume func()) {
	t.Helper()
	var once sync.Once
	resume = func() {
		once.Do(func() {
			for _, pid := range pids {
				if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
					t.Error(err)
				}
			}
		})
	}
	t.Cleanup(resume)
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	return resume
}
