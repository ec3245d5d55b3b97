package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/config"
	"github.com/gangwayhq/gangway/internal/devstack"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// The chaos suite's fleet: chaosNodes `gangway agent` processes of
// chaosGPUs fake GPUs each.
const (
	chaosNodes = 8
	chaosGPUs  = 8
	// chaosMaster is the name the Sentinel knows the Redis master by.
	chaosMaster = "gangway"
	// chaosLeaseTTL is the servers' dispatch lease.
	chaosLeaseTTL = 2 * time.Second
)

// chaosTask is the command every chaos job runs: before it execs the
// workload (demo-train) it takes an exclusive flock on one file per GPU it
// was given (node and CUDA index) and records its start. The locks are held
// by the workload process itself, so they last exactly as long as it runs,
// however it ends (SIGKILL included): a lock it cannot take is a GPU
// another live task holds — a double booking, recorded in busy. $1 is the
// records' folder; the rest is the workload's argv.
const chaosTask = `D=$1; shift
t="$GANGWAY_JOB_ID $GANGWAY_ATTEMPT $GANGWAY_RANK $GANGWAY_NODE_ID"
fd=10
for g in ${CUDA_VISIBLE_DEVICES//,/ }; do
  eval "exec $fd>>\"\$D/gpu-\$GANGWAY_NODE_ID-\$g.lock\""
  flock -n $fd || echo "$t $g" >>"$D/busy"
  fd=$((fd+1))
done
echo "$t" >>"$D/starts"
echo "chaos-start $t"
exec "$@"`

// chaosSpec is a job of the chaos workload: replicas × gpus GPUs running
// demo-train for steps of 100 ms, checkpointing every 10 steps when ckpt.
func chaosSpec(name, team, bin, records string, replicas, gpus, steps int, ckpt bool) gangway.JobSpec {
	sp := gangway.JobSpec{
		Name: name, Team: team,
		Command: []string{"/bin/bash", "-c", chaosTask, "chaos-task", records, bin, "demo-train"},
		Args:    []string{"--steps", strconv.Itoa(steps), "--step-time", "100ms"},
		Gang:    gangway.Gang{Replicas: replicas, GPUsPerReplica: gpus},
	}
	sp.Checkpoint.GracePeriod = gangway.Duration{Duration: 2 * time.Second}
	if ckpt {
		sp.Args = append(sp.Args, "--checkpoint-every", "10")
		sp.Checkpoint.Enabled = true
	}
	return sp
}

// chaosWorkload is 208 short jobs: 80 of 1 GPU, 48 of 2, 40 of 4, 24 of 8,
// 8 gangs of 2 × 8 and 8 jobs of 8 GPUs that may burst to the fake cloud's
// on-demand pool; every fourth job of each kind, and every other gang,
// checkpoints.
func chaosWorkload(bin, records string) []gangway.JobSpec {
	var specs []gangway.JobSpec
	add := func(prefix, team string, n, replicas, gpus, steps int, every int) {
		for i := range n {
			specs = append(specs, chaosSpec(fmt.Sprintf("%s-%d", prefix, i), team, bin, records,
				replicas, gpus, steps+5*(i%5), i%every == 0))
		}
	}
	add("one", "vision", 80, 1, 1, 20, 4)
	add("two", "speech", 48, 1, 2, 20, 4)
	add("four", "nlp", 40, 1, 4, 25, 4)
	add("eight", "nlp", 24, 1, 8, 25, 4)
	add("gang", "nlp", 8, 2, 8, 30, 2)
	for i := range 8 {
		sp := chaosSpec(fmt.Sprintf("burst-%d", i), "speech", bin, records, 1, 8, 30, i%2 == 0)
		sp.Burst = gangway.Burst{Enabled: true, CapacityTypes: []gangway.CapacityType{gangway.CapacityOnDemand}}
		sp.EstimatedRuntime = gangway.Duration{Duration: 5 * time.Second}
		specs = append(specs, sp)
	}
	return specs
}

// chaosRun is the suite's cluster: the stack (Temporal, Redis master,
// PostgreSQL ledger), a Redis replica and Sentinel, `gangway server` and
// `gangway agent` processes, and what it counts.
type chaosRun struct {
	t        *testing.T
	s        *stack
	records  string                // the tasks' start, busy and lock files
	config   string                // the servers' config, less the fake cloud's ID prefix
	redisURL string                // through the Sentinel
	rdb      redis.UniversalClient // through the Sentinel
	view     *capacity.View
	sentinel *devstack.Redis
	replica  *devstack.Redis

	// succeeded are the jobs that ended Succeeded; results every job's
	// final status.
	succeeded map[string]bool
	results   map[string]workflows.Status

	mu      sync.Mutex
	metrics map[*serverProc]string // each live server's /metrics address
	agents  map[string]*agentProc
	started int // servers started
	kills   int
}

func newChaosRun(t *testing.T) *chaosRun {
	s := newStack(t)
	// Fake cloud instances keep their task folders under the servers'
	// temporary folder: one of the test's own.
	s.serverEnv = []string{"TMPDIR=" + filepath.Join(s.logDir, "tmp")}
	must(t, os.Mkdir(filepath.Join(s.logDir, "tmp"), 0o755))
	c := &chaosRun{t: t, s: s, records: filepath.Join(s.logDir, "records"), metrics: map[*serverProc]string{},
		succeeded: map[string]bool{}, results: map[string]workflows.Status{}, agents: map[string]*agentProc{}}
	must(t, os.Mkdir(c.records, 0o755))
	c.replica = devstacktest.RedisWith(t, devstack.RedisOptions{ReplicaOf: s.Redis.Addr})
	// The Sentinel fails the master over after 3 s without it: an empty
	// restart (well under a second) is not a failover.
	c.sentinel = devstacktest.RedisWith(t, devstack.RedisOptions{Sentinel: &devstack.RedisSentinel{
		MasterName: chaosMaster, Master: s.Redis.Addr, DownAfter: 3 * time.Second}})
	c.redisURL = "redis://" + c.sentinel.Addr + "/0?master_name=" + chaosMaster
	s.redisURL = c.redisURL
	rdb, err := config.RedisConfig{URL: c.redisURL}.Dial(t.Context())
	must(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	c.rdb, c.view = rdb, capacity.New(rdb, capacity.Options{})

	join, err := os.ReadFile(s.serverConfig)
	must(t, err)
	c.config = string(join) + fmt.Sprintf(`checkpoint:
  store: %s
cloud:
  burstAfter: 3s
  reconcileInterval: 1s
  orphanGrace: 10s
  offersTTL: 1s
  onPremPricePerGPUHour: {onprem: 1.5}
`, s.CheckpointURL) + fakeOnDemand
	return c
}

// startServer runs a `gangway server` with the chaos config, its metrics on
// an address of its own, and its fake cloud's instances named apart from
// every other server's.
func (c *chaosRun) startServer() *serverProc {
	addr := freeAddr(c.t)
	c.mu.Lock()
	c.started++
	n := c.started
	c.mu.Unlock()
	config := filepath.Join(c.s.logDir, fmt.Sprintf("chaos-%d.yaml", n))
	must(c.t, os.WriteFile(config, []byte(c.config+fmt.Sprintf("      idPrefix: fake-s%d\n", n)), 0o600))
	p := c.s.startServer("--config", config, "--metrics-addr", addr)
	c.mu.Lock()
	c.metrics[p] = addr
	c.mu.Unlock()
	return p
}

// startAgent runs node's `gangway agent` process (again, after a kill: its
// log goes on in the same file).
func (c *chaosRun) startAgent(node string) {
	t, s := c.t, c.s
	logf, err := os.OpenFile(filepath.Join(s.logDir, node+"-agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(t, err)
	cmd := exec.Command(s.bin, "agent", "--temporal-address", s.Temporal.Addr, "--redis-url", c.redisURL,
		"--node-id", node, "--pool", "onprem", "--addr", "127.0.0.1", "--fake-gpus", fmt.Sprintf("%dxH100", chaosGPUs),
		"--data-dir", filepath.Join(s.logDir, node), "--heartbeat-interval", "500ms", "--notices", "none",
		"--metrics-addr", "", "--checkpoint-store", s.CheckpointURL)
	cmd.Env = append(os.Environ(), "GANGWAY_JOIN_TOKEN="+s.joinToken)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start agent %s: %v", node, err)
	}
	p := &agentProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(p.kill)
	c.mu.Lock()
	c.agents[node] = p
	c.mu.Unlock()
}

// TestChaosOnRealServers runs 208 short jobs — 1, 2, 4 and 8 GPUs, 2 × 8
// gangs, some checkpointing, some bursting to the fake cloud — on 8
// simulated nodes, each a `gangway agent` process, with two `gangway
// server` processes sharing a PostgreSQL ledger, a Temporal dev server, and
// a Redis master with a replica and a Sentinel (servers and agents dial the
// Sentinel). The jobs come in nine batches; before each batch after the
// first, 5 s apart, one fault: a worker SIGKILLed, the dispatch leader
// SIGKILLed (each replaced by a new server), the busiest agent SIGKILLed and
// started again, redis-server SIGKILLed and restarted empty, a FLUSHALL, a
// failover through the Sentinel (the master SIGKILLed, the replica
// promoted), the Temporal dev server SIGKILLed and restarted on its database
// 15 s later, and the dispatch leader SIGSTOPped for twice its lease before
// SIGCONT.
//
// Every job must end Succeeded; the tasks' own records must show no GPU
// held by two tasks, no GPU refused as busy, no task started again after
// its job's run had finished; nothing may be left in the cloud or held in
// the view; the ledger must agree with every job's result. The last line
// counts it all.
func TestChaosOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	began := time.Now()
	c := newChaosRun(t)
	s := c.s
	ctx, cancel := context.WithTimeout(t.Context(), 9*time.Minute)
	defer cancel()

	c.startServer()
	c.startServer()
	for i := range chaosNodes {
		c.startAgent(fmt.Sprintf("node-%d", i))
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	waitFor(t, rctx, "the nodes registered", func() bool {
		nodes, err := c.view.FleetNodes(ctx)
		return err == nil && len(nodes) == chaosNodes
	})

	cl := client.New(jobs.New(s.TemporalClient), c.view)
	timing := client.SubmitOptions{Timing: workflows.Timing{HeartbeatTimeout: 3 * time.Second, StartTimeout: 30 * time.Second,
		BootTimeout: 30 * time.Second}}
	specs := chaosWorkload(s.bin, c.records)
	// The jobs come in batches, one before each fault and one at the
	// start, so that every fault meets jobs running and queued.
	batches := make([][]gangway.JobSpec, chaosFaults+1)
	for i, sp := range specs {
		batches[i%len(batches)] = append(batches[i%len(batches)], sp)
	}
	submit := func(batch int) {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < len(batches[batch]); i += 4 {
					chaosSubmit(ctx, t, cl, batches[batch][i], timing)
				}
			})
		}
		wg.Wait()
	}
	submit(0)
	waitFor(t, ctx, "jobs running", func() bool {
		a, err := c.view.Allocations(ctx)
		return err == nil && len(a) >= 5
	})
	c.faults(ctx, func(i int) { submit(i + 1) })
	t.Logf("%d jobs submitted in %d batches, the last %s after the start", len(specs), len(batches), time.Since(began).Round(time.Second))

	// Every job's result, waited for through Temporal outages.
	results := c.results
	lost := 0
	for _, sp := range specs {
		st, err := chaosResult(ctx, cl, sp.Name)
		if err != nil {
			lost++
			t.Logf("lost: %s: %v", sp.Name, err)
			continue
		}
		results[sp.Name] = st
	}
	succeeded, failed := 0, 0
	for _, sp := range specs {
		st, ok := results[sp.Name]
		switch {
		case !ok:
		case st.Phase == gangway.PhaseSucceeded:
			succeeded++
			c.succeeded[sp.Name] = true
		default:
			failed++
			t.Logf("failed: %s ended %s: %s", sp.Name, st.Phase, st.Reason)
		}
	}
	cloud, restarts := 0, 0
	for _, st := range results {
		restarts += st.InfraRestarts
		for _, a := range st.Attempts {
			if a.CapacityType == gangway.CapacityOnDemand {
				cloud++
				break
			}
		}
	}
	t.Logf("every job ended %s after the start: %d ran in the cloud, %d infrastructure restarts in all",
		time.Since(began).Round(time.Second), cloud, restarts)

	doublebooked := countLines(t, filepath.Join(c.records, "busy"))
	gpubusy := c.refusals(results)
	rerun := c.rerunsAfterFinish(specs)
	leaked := c.leaked(ctx)
	mismatch := 0
	for id, st := range results {
		if why := ledgerMismatch(ctx, s.Ledger, id, st); why != "" {
			mismatch++
			t.Logf("ledger mismatch: %s: %s", id, why)
		}
	}
	clean := failed == 0 && lost == 0 && doublebooked == 0 && gpubusy == 0 && leaked == 0 && mismatch == 0 && rerun == 0 &&
		succeeded == len(specs)
	t.Logf("chaos suite took %s", time.Since(began).Round(time.Second))
	fmt.Printf("chaos: jobs=%d succeeded=%d failed=%d lost=%d doublebooked=%d gpubusy=%d leaked=%d ledger_mismatch=%d rerun_after_finish=%d kills=%d\n",
		len(specs), succeeded, failed, lost, doublebooked, gpubusy, leaked, mismatch, rerun, c.kills)
	if !clean {
		t.Fail()
	}
}

// chaosSubmit submits a job, again while Temporal is unreachable: a submit
// that went through before its answer was lost finds the job there.
func chaosSubmit(ctx context.Context, t *testing.T, cl *client.Client, sp gangway.JobSpec, o client.SubmitOptions) {
	for {
		_, err := cl.Submit(ctx, sp, o)
		switch {
		case err == nil || errors.Is(err, client.ErrJobExists):
			return
		case ctx.Err() != nil:
			t.Errorf("submit %s: %v", sp.Name, err)
			return
		}
		time.Sleep(time.Second)
	}
}

// chaosResult waits for a job's result, asking again while Temporal is
// unreachable; only ctx's end gives up.
func chaosResult(ctx context.Context, cl *client.Client, id string) (workflows.Status, error) {
	for {
		st, err := cl.Result(ctx, id)
		if err == nil || ctx.Err() != nil {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, err
		case <-time.After(time.Second):
		}
	}
}

// refusals counts the refusals of a GPU already running something: those
// the agents logged, in every log of the run (the cloud's agents log into
// their server's), or those the jobs' runs ended with, whichever are more.
func (c *chaosRun) refusals(results map[string]workflows.Status) int {
	runs := 0
	for id, st := range results {
		for _, a := range st.Attempts {
			if strings.Contains(a.Reason, "is already running") {
				runs++
				c.t.Logf("GPU refused: %s attempt %d: %s", id, a.Attempt, a.Reason)
			}
		}
	}
	return max(runs, c.loggedRefusals())
}

func (c *chaosRun) loggedRefusals() int {
	logs, _ := filepath.Glob(filepath.Join(c.s.logDir, "*.log"))
	n := 0
	events := make([]int, len(chaosEvents))
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			c.t.Errorf("read %s: %v", l, err)
			continue
		}
		for line := range strings.Lines(string(data)) {
			if strings.Contains(line, "refusing task") && strings.Contains(line, "is already running") {
				n++
				c.t.Logf("GPU refused: %s: %s", filepath.Base(l), strings.TrimSpace(line))
			}
			for i, e := range chaosEvents {
				if strings.Contains(line, e.line) {
					events[i]++
				}
			}
		}
	}
	var seen []string
	for i, e := range chaosEvents {
		seen = append(seen, fmt.Sprintf("%d %s", events[i], e.what))
	}
	c.t.Logf("what the logs show the faults did: %s", strings.Join(seen, ", "))
	return n
}

// chaosEvents are the log lines that show a fault at work, counted for the
// suite's log.
var chaosEvents = []struct{ line, what string }{
	{"rebuilding it before placing anything", "view rebuilds begun"},
	{"msg=\"view rebuilt\"", "view rebuilds done"},
	{"Temporal lost track of a task; adopting it", "tasks adopted after Temporal lost track of them"},
	{"node missing from the view; registering again", "nodes registered again"},
	{"terminated orphan instance", "orphan instances terminated"},
	{restoredWorkload, "new leaders that went on from what the last one learned"},
	{"leaving the lease to the last leader", "standbys that left a lost view's lease to the last leader"},
}

// rerunsAfterFinish counts the tasks started again after their job's run
// had finished: a start of a later attempt than one whose every rank ran to
// its end ("done: steps" in the task's own log), or a start of the same
// task after it had logged that.
func (c *chaosRun) rerunsAfterFinish(specs []gangway.JobSpec) int {
	t := c.t
	ranks := map[string]int{}
	for _, sp := range specs {
		ranks[sp.Name] = sp.Gang.Replicas
	}
	type task struct {
		job           string
		attempt, rank int
	}
	// The task logs of every agent, on-prem and cloud.
	var logs []string
	_ = filepath.WalkDir(c.s.logDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "attempt-") && strings.HasSuffix(d.Name(), ".log") {
			logs = append(logs, path)
		}
		return nil
	})
	done := map[task]bool{}
	n := 0
	for _, l := range logs {
		var tk task
		tk.job = filepath.Base(filepath.Dir(l))
		if _, err := fmt.Sscanf(filepath.Base(l), "attempt-%d-rank-%d.log", &tk.attempt, &tk.rank); err != nil {
			continue
		}
		data, err := os.ReadFile(l)
		if err != nil {
			t.Errorf("read %s: %v", l, err)
			continue
		}
		finished := false
		for line := range strings.Lines(string(data)) {
			switch {
			case strings.Contains(line, "chaos-start ") && finished:
				n++
				t.Logf("rerun after finish: %s attempt %d rank %d started again in the same attempt", tk.job, tk.attempt, tk.rank)
			case strings.Contains(line, "done: steps "):
				finished = true
			}
		}
		if finished {
			done[tk] = true
		}
	}
	// The first attempt of each job whose every rank finished.
	finishedAt := map[string]int{}
	for tk := range done {
		all := true
		for r := range ranks[tk.job] {
			all = all && done[task{tk.job, tk.attempt, r}]
		}
		if a, ok := finishedAt[tk.job]; all && (!ok || tk.attempt < a) {
			finishedAt[tk.job] = tk.attempt
		}
	}
	// The count means something only if the logs were read: every job
	// that succeeded finished an attempt in them.
	if len(finishedAt) < len(c.succeeded) {
		t.Errorf("the task logs show %d jobs whose run finished, want every succeeded job's (%d)", len(finishedAt), len(c.succeeded))
	}
	f, err := os.Open(filepath.Join(c.records, "starts"))
	if err != nil {
		t.Errorf("starts: %v", err)
		return n
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	starts := 0
	for sc.Scan() {
		starts++
		var tk task
		var node string
		if _, err := fmt.Sscan(sc.Text(), &tk.job, &tk.attempt, &tk.rank, &node); err != nil {
			t.Errorf("starts: %q: %v", sc.Text(), err)
			continue
		}
		if a, ok := finishedAt[tk.job]; ok && tk.attempt > a {
			n++
			t.Logf("rerun after finish: %s attempt %d rank %d started on %s after attempt %d had finished; %s", tk.job, tk.attempt, tk.rank, node, a,
				c.attemptEnd(tk.job, a))
		}
	}
	members := 0
	for _, sp := range specs {
		members += sp.Gang.Replicas
	}
	if starts < members {
		t.Errorf("the tasks recorded %d starts, want at least one per gang member (%d)", starts, members)
	}
	t.Logf("the tasks recorded %d starts (%d gang members in all) in %d task logs", starts, members, len(logs))
	return n
}

// attemptEnd says how the job's workflow recorded the attempt's end, for a
// rerun's log line.
func (c *chaosRun) attemptEnd(job string, attempt int) string {
	for _, a := range c.results[job].Attempts {
		if a.Attempt == attempt {
			return fmt.Sprintf("the workflow recorded attempt %d on %v ending %s at %s: %s",
				attempt, a.Nodes, a.Ended, a.EndedAt.Local().Format("15:04:05.000"), a.Reason)
		}
	}
	return fmt.Sprintf("the workflow kept no record of attempt %d", attempt)
}

// leaked counts what is still held once every job has ended: cloud
// instances the live servers' fake clouds still run (the reconciler given
// its grace to end orphans), allocations in the view, and GPUs whose lock a
// task process still holds.
func (c *chaosRun) leaked(ctx context.Context) int {
	t := c.t
	instances := func() (n int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, addr := range c.metrics {
			v, ok := scrape(addr, "gangway_cloud_instances")
			if !ok {
				return -1
			}
			n += int(v)
		}
		return n
	}
	var inst, allocs int
	deadline := time.Now().Add(30 * time.Second)
	for {
		inst = instances()
		a, err := c.view.Allocations(ctx)
		allocs = len(a)
		if err != nil {
			allocs = -1
		}
		if (inst == 0 && allocs == 0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	n := max(inst, 0) + max(allocs, 0)
	if inst != 0 || allocs != 0 {
		t.Logf("left: %d cloud instances, %d allocations (-1: cannot tell)", inst, allocs)
		n += boolInt(inst < 0) + boolInt(allocs < 0)
	}
	locks, _ := filepath.Glob(filepath.Join(c.records, "gpu-*.lock"))
	if len(locks) < chaosNodes*chaosGPUs/2 {
		t.Errorf("the tasks locked %d GPUs' files, want most of the fleet's %d", len(locks), chaosNodes*chaosGPUs)
	}
	for _, l := range locks {
		f, err := os.Open(l)
		if err != nil {
			t.Errorf("%s: %v", l, err)
			continue
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			n++
			t.Logf("left: %s still held by a task process (%v)", filepath.Base(l), err)
		}
		f.Close()
	}
	return n
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ledgerMismatch says how the SQL ledger disagrees with a job's result:
// its segments (one per run) and their GPU-seconds and dollars; "" when it
// agrees.
func ledgerMismatch(ctx context.Context, ledger *accounting.Ledger, id string, st workflows.Status) string {
	tot, err := ledger.PerJob(ctx, id)
	if err != nil {
		return err.Error()
	}
	runs := len(st.Attempts)
	if st.EarlierAttempts != nil {
		runs += st.EarlierAttempts.Count
	}
	if tot.Segments != runs || math.Abs(tot.Dollars-st.Dollars) > 1e-9 || math.Abs(tot.GPUSeconds-st.GPUSeconds) > 1e-6 {
		return fmt.Sprintf("ledger %d segments, %.6f GPU-seconds, $%.9f; the job %d runs, %.6f GPU-seconds, $%.9f",
			tot.Segments, tot.GPUSeconds, tot.Dollars, runs, st.GPUSeconds, st.Dollars)
	}
	return ""
}

// countLines counts the lines of a file; a missing file has none.
func countLines(t *testing.T, path string) int {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return 0
	}
	for line := range strings.Lines(string(data)) {
		t.Logf("double booking: %s", strings.TrimSpace(line))
	}
	return strings.Count(string(data), "\n")
}

// chaosFaults is how many faults the script has.
const chaosFaults = 8

// faultGap is the time between two faults: long enough for the cluster to
// be seen working again in between.
const faultGap = 5 * time.Second

// faults runs the chaos script while the jobs run, each fault in turn with
// faultGap between them, counting each.
func (c *chaosRun) faults(ctx context.Context, before func(i int)) {
	t := c.t
	script := []struct {
		name string
		do   func()
	}{
		{"SIGKILL a worker (the server not leading dispatch), then start another", func() {
			_, lpid := c.leader(ctx)
			worker := 0
			c.s.mu.Lock()
			for pid := range c.s.servers {
				if pid != lpid {
					worker = pid
				}
			}
			c.s.mu.Unlock()
			c.killServer(worker)
			c.startServer()
		}},
		{"SIGKILL the dispatch leader, then start another server", func() {
			holder, pid := c.leader(ctx)
			c.workloadStored(ctx, "before the leader is killed")
			restored := c.logLines(restoredWorkload)
			c.killServer(pid)
			waitFor(t, ctx, "a new dispatch leader", func() bool {
				h, err := c.view.LeaseHolder(ctx)
				return err == nil && h != "" && h != holder
			})
			// The new leader never led: it goes on from the stored workload.
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			waitFor(t, rctx, "the new leader to restore the typical workload", func() bool {
				return c.logLines(restoredWorkload) > restored
			})
			c.startServer()
		}},
		{"SIGKILL the agent running the most tasks, then start it again", func() {
			var node string
			var held int
			waitFor(t, ctx, "an agent running tasks", func() bool {
				node, held = c.busiestNode(ctx)
				return held > 0
			})
			c.mu.Lock()
			p := c.agents[node]
			c.mu.Unlock()
			t.Logf("killing the agent of %s, which holds %d allocations' GPUs", node, held)
			p.kill()
			time.Sleep(2 * time.Second)
			c.startAgent(node)
		}},
		{"SIGKILL redis-server, restarted empty", func() {
			must(t, c.s.Redis.Kill())
			must(t, c.s.Redis.Restart(ctx))
			c.rebuilt(ctx, "an empty restart")
		}},
		{"FLUSHALL", func() {
			must(t, c.rdb.FlushAll(ctx).Err())
			c.rebuilt(ctx, "FLUSHALL")
			// The leader stores its workload again in the new view.
			c.workloadStored(ctx, "after FLUSHALL")
		}},
		{"fail Redis over through the Sentinel: the master SIGKILLed, its replica promoted", func() {
			rc := redis.NewClient(&redis.Options{Addr: c.replica.Addr})
			defer rc.Close()
			sc := redis.NewSentinelClient(&redis.Options{Addr: c.sentinel.Addr})
			defer sc.Close()
			waitFor(t, ctx, "the replica in sync and known to the Sentinel", func() bool {
				info, err := rc.Info(ctx, "replication").Result()
				reps, serr := sc.Replicas(ctx, chaosMaster).Result()
				return err == nil && strings.Contains(info, "master_link_status:up") && serr == nil && len(reps) == 1
			})
			must(t, c.s.Redis.Kill())
			waitFor(t, ctx, "the Sentinel to promote the replica", func() bool {
				addr, err := sc.GetMasterAddrByName(ctx, chaosMaster).Result()
				return err == nil && len(addr) == 2 && "127.0.0.1:"+addr[1] == c.replica.Addr
			})
			c.rebuilt(ctx, "the failover")
		}},
		{"SIGKILL the Temporal dev server, restarted on its database 15 s later", func() {
			must(t, c.s.Temporal.Kill())
			time.Sleep(temporalOutage)
			must(t, c.s.Temporal.Restart(ctx))
		}},
		{"SIGSTOP the dispatch leader past its lease, then SIGCONT", func() {
			holder, pid := c.leader(ctx)
			must(t, syscall.Kill(pid, syscall.SIGSTOP))
			defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
			stopped := time.Now()
			waitFor(t, ctx, "another dispatch leader", func() bool {
				h, err := c.view.LeaseHolder(ctx)
				return err == nil && h != "" && h != holder
			})
			// Stopped at least twice the lease, and a lease past the takeover.
			time.Sleep(max(2*chaosLeaseTTL-time.Since(stopped), chaosLeaseTTL))
			must(t, syscall.Kill(pid, syscall.SIGCONT))
		}},
	}
	if len(script) != chaosFaults {
		t.Fatalf("the script has %d faults, chaosFaults says %d", len(script), chaosFaults)
	}
	for i, f := range script {
		before(i)
		time.Sleep(faultGap)
		at := time.Now()
		t.Logf("fault at %s: %s", at.Format("15:04:05.000"), f.name)
		f.do()
		c.kills++
		t.Logf("fault: %s: done in %s", f.name, time.Since(at).Round(100*time.Millisecond))
	}
}

// busiestNode is the on-prem node holding the most allocations, and how
// many it holds.
func (c *chaosRun) busiestNode(ctx context.Context) (string, int) {
	allocs, err := c.view.Allocations(ctx)
	if err != nil {
		return "", 0
	}
	held := map[string]int{}
	best := "node-0"
	for _, a := range allocs {
		for _, m := range a.Members {
			if _, ok := c.agents[m.NodeID]; ok {
				held[m.NodeID]++
				if held[m.NodeID] > held[best] {
					best = m.NodeID
				}
			}
		}
	}
	return best, held[best]
}

// leader is the server process holding the dispatch lease.
func (c *chaosRun) leader(ctx context.Context) (holder string, pid int) {
	waitFor(c.t, ctx, "a dispatch leader", func() bool {
		h, err := c.view.LeaseHolder(ctx)
		if err != nil || h == "" {
			return false
		}
		holder, pid = h, holderPID(h)
		return true
	})
	return holder, pid
}

// killServer SIGKILLs the server with pid and forgets its metrics.
func (c *chaosRun) killServer(pid int) {
	c.mu.Lock()
	for p := range c.metrics {
		if p.cmd.Process.Pid == pid {
			delete(c.metrics, p)
		}
	}
	c.mu.Unlock()
	c.s.killServer(pid)
}

// restoredWorkload is what a new leader logs as it goes on from what the
// last one stored.
const restoredWorkload = "take over: restored what the last leader learned"

// workloadStored waits until the view holds the typical workload the
// dispatch leader learns (it stores what it learned at its first arrival,
// at most every minute after, and at once in a rebuilt view).
func (c *chaosRun) workloadStored(ctx context.Context, when string) {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	waitFor(c.t, wctx, "the typical workload stored "+when, func() bool {
		l, err := c.view.Learned(ctx)
		return err == nil && len(l.Workload) > 0 && l.Arrivals > 0
	})
}

// logLines counts the lines of the servers' and agents' logs that hold s.
func (c *chaosRun) logLines(s string) int {
	logs, _ := filepath.Glob(filepath.Join(c.s.logDir, "*.log"))
	n := 0
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err == nil {
			n += strings.Count(string(data), s)
		}
	}
	return n
}

// rebuilt waits until the view is rebuilt for its current generation.
func (c *chaosRun) rebuilt(ctx context.Context, what string) {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	waitFor(c.t, wctx, "the view rebuilt after "+what, func() bool {
		ok, err := c.view.Rebuilt(ctx)
		return err == nil && ok
	})
}
