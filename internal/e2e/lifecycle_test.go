package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	tclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/internal/nodeauth"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

var updateHistories = flag.Bool("update-histories", false, "write JobWorkflow histories to workflows/testdata/histories for the replay test")

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// buildGangway builds the gangway binary the servers and tasks run.
func buildGangway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gangway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gangway")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build gangway: %v\n%s", err, out)
	}
	return bin
}

// serverProc is one `gangway server` child process.
type serverProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *serverProc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

type stack struct {
	*fullstack.Stack
	t      *testing.T
	bin    string
	logDir string

	mu      sync.Mutex
	servers map[int]*serverProc // by pid

	// serverConfig is the servers' config file: the join tokens of
	// server.join.tokensFile, of which joinToken lets `gangway agent`
	// processes join pool onprem.
	serverConfig, joinToken string
	// redisURL, when set, is the Redis URL the servers dial instead of
	// the stack's redis-server (a Sentinel's, in the chaos suite).
	redisURL string
	// serverEnv is added to the servers' environment.
	serverEnv []string
}

// serverRedisURL is the Redis URL `gangway server` processes dial.
func (s *stack) serverRedisURL() string {
	if s.redisURL != "" {
		return s.redisURL
	}
	return s.Redis.URL
}

// newStack starts a Temporal dev server, a redis-server and a PostgreSQL
// server for the test (fullstack, as `gangway dev` does, without the
// in-process server: tests run `gangway server` processes they can kill,
// and several servers share a PostgreSQL ledger, as in production), builds
// gangway, and connects a Temporal client, the Redis view and the ledger.
// The servers stop when the test ends; a failed test prints the tail of
// every log in logDir.
func newStack(t *testing.T) *stack {
	s := &stack{t: t, bin: buildGangway(t), logDir: t.TempDir(), servers: map[int]*serverProc{}}
	logf, err := os.Create(filepath.Join(s.logDir, "agents.log"))
	if err != nil {
		t.Fatal(err)
	}
	pg := devstacktest.Postgres(t)
	if err := pg.CreateDatabase(t.Context(), "gangway"); err != nil {
		t.Fatal(err)
	}
	st, err := fullstack.Start(t.Context(), fullstack.Options{Dir: s.logDir, Headless: true,
		Log: slog.New(slog.NewTextHandler(logf, nil)), LedgerDSN: pg.URL("gangway")})
	if err != nil {
		t.Fatal(err)
	}
	s.Stack = st
	t.Cleanup(func() {
		st.Close()
		logf.Close()
	})
	s.joinToken = "gwj-e2e-onprem-" + strconv.Itoa(os.Getpid())
	tokens := filepath.Join(s.logDir, "join-tokens")
	s.serverConfig = filepath.Join(s.logDir, "server.yaml")
	if err := os.WriteFile(tokens, []byte(nodeauth.TokenLine(s.joinToken, "onprem", "")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(s.logDir, "join-secret")
	if err := os.WriteFile(secret, []byte("e2e-join-secret-0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.serverConfig, []byte("server:\n  join:\n    tokensFile: "+tokens+"\n    secretFile: "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stopAll()
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(s.logDir, "*.log"))
			for _, l := range logs {
				data, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", filepath.Base(l), tail(string(data), 4000))
			}
		}
	})
	return s
}

// startAgent runs an in-process agent for n, heartbeating every 500ms,
// until the test ends or Stop; cfg's other fields are kept.
func (s *stack) startAgent(n gangway.Node, cfg agent.Config) *fullstack.Agent {
	cfg.Node, cfg.HeartbeatInterval = n, 500*time.Millisecond
	a := s.StartAgent(cfg)
	s.t.Cleanup(func() {
		if err := a.Stop(); err != nil {
			s.t.Errorf("agent %s: %v", n.ID, err)
		}
	})
	return a
}

func (s *stack) startServer(extra ...string) *serverProc {
	s.t.Helper()
	logf, err := os.CreateTemp(s.logDir, "server-*.log")
	if err != nil {
		s.t.Fatal(err)
	}
	args := append([]string{"server", "--config", s.serverConfig,
		"--temporal-address", s.Temporal.Addr, "--redis-url", s.serverRedisURL(), "--ledger", s.LedgerDSN,
		"--metrics-addr", "127.0.0.1:0", "--dispatch-interval", "200ms", "--lease-ttl", "2s", "--node-ttl", "5s",
		"--api-addr", "127.0.0.1:0", "--api-tokens", s.apiTokens()}, extra...)
	cmd := exec.Command(s.bin, args...)
	if s.serverEnv != nil {
		cmd.Env = append(os.Environ(), s.serverEnv...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start server: %v", err)
	}
	p := &serverProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	s.mu.Lock()
	s.servers[cmd.Process.Pid] = p
	s.mu.Unlock()
	return p
}

func (s *stack) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, p := range s.servers {
		p.kill()
		delete(s.servers, pid)
	}
}

func (s *stack) killServer(pid int) {
	s.mu.Lock()
	p := s.servers[pid]
	delete(s.servers, pid)
	s.mu.Unlock()
	if p == nil {
		s.t.Fatalf("no server with pid %d", pid)
	}
	p.kill()
}

// holderPID extracts the pid from a lease holder "host-pid-uuid8".
func holderPID(holder string) int {
	parts := strings.Split(holder, "-")
	if len(parts) < 3 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[len(parts)-2])
	return pid
}

// record collects every task start/stop the agents saw.
type record struct {
	mu     sync.Mutex
	events []agent.Event
}

func (r *record) Record(e agent.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// started reports whether any task of job has started.
func (r *record) started(job gangway.JobID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Start && e.JobID == job {
			return true
		}
	}
	return false
}

// running counts the tasks started and not yet stopped on node.
func (r *record) running(node string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	open := map[string]bool{}
	for _, e := range r.events {
		if e.Node != node {
			continue
		}
		task := fmt.Sprintf("%s/%d/%d", e.JobID, e.Attempt, e.Rank)
		if e.Start {
			open[task] = true
		} else {
			delete(open, task)
		}
	}
	return len(open)
}

// checkNoDoubleBooking proves invariant 1 from the agents' own record: on
// every GPU, each task stops before the next one starts.
func (r *record) checkNoDoubleBooking(t *testing.T) (starts int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	type key struct {
		node string
		gpu  int
	}
	holder := map[key]string{}
	for _, e := range r.events {
		task := fmt.Sprintf("%s/%d/%d", e.JobID, e.Attempt, e.Rank)
		for _, g := range e.GPUs {
			k := key{e.Node, g}
			switch {
			case e.Start && holder[k] != "":
				t.Errorf("GPU %s/%d: %s started while %s held it", e.Node, g, task, holder[k])
			case e.Start:
				holder[k] = task
			case holder[k] != task:
				t.Errorf("GPU %s/%d: %s stopped but %q held it", e.Node, g, task, holder[k])
			default:
				delete(holder, k)
			}
		}
		if e.Start {
			starts++
		}
	}
	for k, task := range holder {
		t.Errorf("GPU %s/%d: %s never stopped", k.node, k.gpu, task)
	}
	return starts
}

// TestLifecycleOnRealServers runs 40 jobs, several of them 2 × 8 gangs, on 4
// simulated 8-GPU nodes against a real Redis and a real Temporal server,
// kills the dispatch leader, stops a node's agent and then kills every
// server process mid-run, and
// checks that every job still ends Succeeded and no GPU was ever held by
// two tasks.
func TestLifecycleOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	tc, view := s.TemporalClient, s.View

	rec := &record{}
	agents := map[string]*fullstack.Agent{}
	fleet := agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 4, GPUs: 8, Model: "H100"}})
	for _, n := range fleet {
		agents[n.ID] = s.startAgent(n, agent.Config{Recorder: rec})
	}
	waitFor(t, ctx, "4 nodes registered", func() bool {
		nodes, err := view.FleetNodes(ctx)
		return err == nil && len(nodes) == 4
	})
	s.startServer()
	s.startServer()

	cl := client.New(jobs.New(tc), view)
	timing := client.SubmitOptions{Timing: workflows.Timing{HeartbeatTimeout: 5 * time.Second, StartTimeout: 30 * time.Second}}
	specs := workload(s.bin)
	for _, spec := range specs {
		if _, err := cl.Submit(ctx, spec, timing); err != nil {
			t.Fatalf("submit %s: %v", spec.Name, err)
		}
	}
	// A second submit of the same job is refused and creates nothing.
	if _, err := cl.Submit(ctx, specs[0], timing); !errors.Is(err, client.ErrJobExists) {
		t.Fatalf("duplicate submit: err = %v, want ErrJobExists", err)
	}

	// Kill the dispatch leader mid-run; the other server takes over.
	var leader string
	waitFor(t, ctx, "a dispatch leader", func() bool {
		leader, _ = view.LeaseHolder(ctx)
		return leader != ""
	})
	waitFor(t, ctx, "some jobs running", func() bool { return len(mustAllocations(t, ctx, view)) >= 3 })
	t.Logf("killing dispatch leader %s", leader)
	s.killServer(holderPID(leader))
	waitFor(t, ctx, "a new dispatch leader", func() bool {
		h, _ := view.LeaseHolder(ctx)
		return h != "" && h != leader
	})
	s.startServer()

	// Stop a node's agent mid-run (its tasks are killed and requeued on
	// other nodes without spending retries), then bring it back.
	// Tasks the agent is running (an allocation whose task is still in
	// the node's queue is picked up by the restarted agent instead).
	onNode3 := rec.running("node-3")
	t.Logf("stopping the agent of node-3 (%d tasks on it)", onNode3)
	if err := agents["node-3"].Stop(); err != nil {
		t.Errorf("agent node-3: %v", err)
	}
	time.Sleep(3 * time.Second)
	s.startAgent(fleet[3], agent.Config{Recorder: rec})

	// Kill every server process — no worker at all — then start one again.
	time.Sleep(2 * time.Second)
	t.Log("killing every server process")
	s.stopAll()
	time.Sleep(2 * time.Second)
	s.startServer()

	results := map[string]workflows.Status{}
	for _, spec := range specs {
		st, err := cl.Result(ctx, spec.Name)
		if err != nil {
			t.Fatalf("result of %s: %v", spec.Name, err)
		}
		results[spec.Name] = st
		if st.Phase != gangway.PhaseSucceeded {
			t.Errorf("job %s ended %s: %s", spec.Name, st.Phase, st.Reason)
		}
	}
	starts := rec.checkNoDoubleBooking(t)
	if starts < 40 {
		t.Errorf("agents recorded %d task starts, want at least 40", starts)
	}
	infra := 0
	for _, st := range results {
		infra += st.InfraRestarts
	}
	t.Logf("%d jobs ran, %d infrastructure restarts", len(results), infra)
	if onNode3 > 0 && infra == 0 {
		t.Errorf("node-3's agent stopped under %d tasks, but no job was requeued", onNode3)
	}
	if st := results["flaky-0"]; st.UserRetries != 1 {
		t.Errorf("flaky-0: user retries %d, want 1", st.UserRetries)
	}
	if allocs := mustAllocations(t, ctx, view); len(allocs) != 0 {
		t.Errorf("allocations left after every job ended: %+v", allocs)
	}
	if q, err := view.Queue(ctx); err != nil || len(q) != 0 {
		t.Errorf("queue left after every job ended: %v %v", q, err)
	}

	// Cancel a running job: it ends Cancelled and its GPUs come back.
	long := spec("long-cancel", "ml", 1, 8, s.bin, 100000)
	if _, err := cl.Submit(ctx, long, timing); err != nil {
		t.Fatalf("submit: %v", err)
	}
	waitFor(t, ctx, "long job running", func() bool {
		st, err := cl.Status(ctx, long.Name)
		return err == nil && st.Phase == gangway.PhaseRunning
	})
	if err := cl.Cancel(ctx, long.Name); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	st, err := cl.Result(ctx, long.Name)
	if err != nil || st.Phase != gangway.PhaseCancelled {
		t.Fatalf("cancelled job: phase %s, err %v", st.Phase, err)
	}
	if allocs := mustAllocations(t, ctx, view); len(allocs) != 0 {
		t.Errorf("allocations left after cancel: %+v", allocs)
	}
	rec.checkNoDoubleBooking(t)

	if *updateHistories {
		for _, id := range []string{"flaky-0", "gang-2x8-0", long.Name} {
			saveHistory(t, ctx, tc, id)
		}
	}
}

// workload is 40 jobs: 22 single-GPU, 8 × 4-GPU, 4 × 2-GPU, 4 gangs of
// 2 × 8, one 1-GPU job that fails its first attempt and is retried, and one
// 2 × 4 gang.
func workload(bin string) []gangway.JobSpec {
	var specs []gangway.JobSpec
	add := func(prefix, team string, n, replicas, gpus, steps int) {
		for i := range n {
			specs = append(specs, spec(fmt.Sprintf("%s-%d", prefix, i), team, replicas, gpus, bin, steps+3*i))
		}
	}
	add("single", "vision", 22, 1, 1, 15)
	add("quad", "nlp", 8, 1, 4, 20)
	add("pair", "speech", 4, 1, 2, 20)
	add("gang-2x8", "nlp", 4, 2, 8, 25)
	add("gang-2x4", "speech", 1, 2, 4, 20)
	flaky := spec("flaky-0", "vision", 1, 1, bin, 10)
	flaky.Command = []string{"/bin/sh", "-c", `test "$GANGWAY_ATTEMPT" -gt 1 || { echo "first attempt fails"; exit 3; }; exec "$0" demo-train --steps 10 --step-time 100ms`, bin}
	flaky.Args = nil
	flaky.Retries = 1
	return append(specs, flaky)
}

func spec(name, team string, replicas, gpus int, bin string, steps int) gangway.JobSpec {
	s := gangway.JobSpec{
		Name: name, Team: team, Command: []string{bin, "demo-train"},
		Args: []string{"--steps", strconv.Itoa(steps), "--step-time", "100ms"},
		Gang: gangway.Gang{Replicas: replicas, GPUsPerReplica: gpus},
	}
	s.Checkpoint.GracePeriod = gangway.Duration{Duration: time.Second}
	return s
}

func mustAllocations(t *testing.T, ctx context.Context, v *capacity.View) []gangway.Assignment {
	t.Helper()
	a, err := v.Allocations(ctx)
	if err != nil {
		t.Fatalf("allocations: %v", err)
	}
	return a
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// saveHistory writes a job's workflow history as JSON for the replay test.
func saveHistory(t *testing.T, ctx context.Context, tc tclient.Client, id string) {
	t.Helper()
	it := tc.GetWorkflowHistory(ctx, id, "", false, 0)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		h.Events = append(h.Events, e)
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repoRoot(t), "workflows", "testdata", "histories")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, id+".json")
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d events)", path, len(h.Events))
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
