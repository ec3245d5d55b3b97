package workflows_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

var updateHistories = flag.Bool("update-histories", false, "write the continued runs' histories to testdata/histories for the replay test")

// Temporal's default limits the runs must stay under: the history event
// count at which the server starts warning, and the largest payload
// (blob) it accepts.
const (
	temporalWarnEvents = 10240
	temporalBlobBytes  = 2 << 20
)

// simQueue is the one task queue every simulated node's tasks go to, as
// an agent host's do (workflows.HostTaskQueue).
var simQueue = workflows.HostTaskQueue("sim")

// simCluster stands in for the Redis view, the dispatch loop and the
// agents of simulated nodes: Enqueue places the attempt at once (one
// member per node, all GPUs), and RunTask runs until it is cancelled —
// except on attempts past the job's last, which exit 0.
//
// Every heartbeat of an activity is a write to the dev server's SQLite
// database, and hundreds a second starve it, so a member heartbeats only
// once its attempt is being stopped (the test preempts it well within its
// heartbeat timeout), to learn of the cancellation.
type simCluster struct {
	tc tclient.Client

	mu      sync.Mutex
	started map[string]int // "job/attempt" → members started
	stopped map[string]chan struct{}
	last    map[gangway.JobID]int
}

// stopping is closed when the attempt is being stopped.
func (c *simCluster) stopping(job gangway.JobID, attempt int) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := fmt.Sprintf("%s/%d", job, attempt)
	if c.stopped[k] == nil {
		c.stopped[k] = make(chan struct{})
	}
	return c.stopped[k]
}

func (c *simCluster) enqueue(ctx context.Context, in workflows.EnqueueInput) error {
	e := in.Entry
	a := gangway.Assignment{JobID: e.JobID, Attempt: e.Attempt}
	for r := range e.Replicas {
		m := gangway.Member{Rank: r, NodeID: fmt.Sprintf("sim-%d", r), Pool: "onprem", TaskQueue: simQueue}
		for g := range e.GPUsPerReplica {
			m.GPUs = append(m.GPUs, g)
		}
		a.Members = append(a.Members, m)
	}
	return c.tc.SignalWorkflow(ctx, string(e.JobID), "", workflows.SignalPlaced, a)
}

func (c *simCluster) runTask(ctx context.Context, in workflows.RunTaskInput) (workflows.RunTaskResult, error) {
	c.mu.Lock()
	c.started[fmt.Sprintf("%s/%d", in.JobID, in.Attempt)]++
	finish := in.Attempt > c.last[in.JobID]
	c.mu.Unlock()
	if finish {
		return workflows.RunTaskResult{}, nil
	}
	select {
	case <-ctx.Done():
		return workflows.RunTaskResult{}, ctx.Err()
	case <-c.stopping(in.JobID, in.Attempt):
	}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		activity.RecordHeartbeat(ctx, workflows.RunTaskProgress{})
		select {
		case <-ctx.Done():
			return workflows.RunTaskResult{}, ctx.Err()
		case <-t.C:
		}
	}
}

func (c *simCluster) startedOf(job gangway.JobID, attempt int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started[fmt.Sprintf("%s/%d", job, attempt)]
}

// awaitCancelRequests waits until the workflow has asked Temporal to
// cancel every member's task, so that each member's next heartbeat learns
// of it.
func (c *simCluster) awaitCancelRequests(t *testing.T, ctx context.Context, job gangway.JobID, members int) {
	t.Helper()
	for {
		d, err := c.tc.DescribeWorkflowExecution(ctx, string(job), "")
		if err != nil {
			t.Fatalf("describe %s: %v", job, err)
		}
		requested := 0
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() == workflows.ActivityRunTask && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED {
				requested++
			}
		}
		if requested == members {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %d of %d tasks asked to cancel", job, requested, members)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startSim starts a real Temporal dev server (default limits; state in
// memory), the job
// workflow's worker with the simulated cluster's activities, and a worker
// for the simulated nodes' tasks.
func startSim(t *testing.T) *simCluster {
	t.Helper()
	// Hundreds of heartbeats and task completions a second: a server on
	// a database file spends its time waiting for the disk.
	srv := devstacktest.TemporalInMemory(t)
	tc, err := tclient.Dial(tclient.Options{HostPort: srv.Addr, Namespace: srv.Namespace,
		Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	c := &simCluster{tc: tc, started: map[string]int{}, stopped: map[string]chan struct{}{}, last: map[gangway.JobID]int{}}

	w := worker.New(tc, workflows.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(workflows.JobWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowName})
	noop := func(name string) {
		w.RegisterActivityWithOptions(func(context.Context, any) error { return nil }, activity.RegisterOptions{Name: name})
	}
	w.RegisterActivityWithOptions(c.enqueue, activity.RegisterOptions{Name: workflows.ActivityEnqueue})
	w.RegisterActivityWithOptions(func(context.Context, workflows.ReleaseInput) (int, error) { return 0, nil },
		activity.RegisterOptions{Name: workflows.ActivityRelease})
	w.RegisterActivityWithOptions(func(context.Context, workflows.LatestCheckpointInput) (workflows.CheckpointRef, error) {
		return workflows.CheckpointRef{}, nil
	}, activity.RegisterOptions{Name: workflows.ActivityLatestCheckpoint})
	// The sim's placements are the only ones, so each is the committed one.
	w.RegisterActivityWithOptions(func(context.Context, workflows.CheckPlacementInput) (workflows.CheckPlacementResult, error) {
		return workflows.CheckPlacementResult{Committed: true}, nil
	}, activity.RegisterOptions{Name: workflows.ActivityCheckPlacement})
	noop(workflows.ActivityDequeue)
	noop(workflows.ActivityRecordUsage)
	noop(workflows.ActivityRecordRun)

	nodes := worker.New(tc, simQueue, worker.Options{
		MaxConcurrentActivityExecutionSize: 1024,
		MaxConcurrentActivityTaskPollers:   16,
		MaxHeartbeatThrottleInterval:       250 * time.Millisecond,
	})
	nodes.RegisterActivityWithOptions(c.runTask, activity.RegisterOptions{Name: workflows.ActivityRunTask})
	for _, w := range []worker.Worker{w, nodes} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}
	return c
}

// preemptEach submits a gang whose members run until stopped, preempts
// attempts 1..n once all their members run, lets attempt n+1 finish, and
// returns the job's result.
func (c *simCluster) preemptEach(t *testing.T, ctx context.Context, name string, replicas, gpus, n int, limits workflows.Limits) workflows.Status {
	t.Helper()
	spec := gangway.JobSpec{Name: name, Team: "ml", Command: []string{"train"},
		Gang: gangway.Gang{Replicas: replicas, GPUsPerReplica: gpus}}
	spec.Default()
	c.mu.Lock()
	c.last[spec.Name] = n
	c.mu.Unlock()
	j := jobs.New(c.tc)
	// A member is silent until its attempt is stopped; a long heartbeat
	// timeout keeps a slow start from counting as a lost node.
	o := jobs.StartOptions{Limits: limits, Timing: workflows.Timing{HeartbeatTimeout: 2 * time.Minute}}
	if err := j.Start(ctx, spec, o); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for attempt := 1; attempt <= n; attempt++ {
		for c.startedOf(spec.Name, attempt) < replicas {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: attempt %d never had all %d members running", name, attempt, replicas)
			case <-time.After(20 * time.Millisecond):
			}
		}
		err := j.SignalPreempt(ctx, spec.Name, workflows.PreemptRequest{Attempt: attempt, Cause: workflows.CausePreempted,
			Reason: fmt.Sprintf("test preemption %d of %d", attempt, n)})
		if err != nil {
			t.Fatalf("preempt %s attempt %d: %v", name, attempt, err)
		}
		c.awaitCancelRequests(t, ctx, spec.Name, replicas)
		close(c.stopping(spec.Name, attempt))
		if attempt%20 == 0 {
			t.Logf("%s: preempted %d times in %s", name, attempt, time.Since(began).Round(time.Second))
		}
	}
	res, err := j.Result(ctx, spec.Name)
	if err != nil {
		t.Fatalf("result of %s: %v", name, err)
	}
	if res.Phase != gangway.PhaseSucceeded || res.Attempt != n+1 || res.InfraRestarts != n || res.UserRetries != 0 {
		t.Fatalf("%s ended %s at attempt %d, %d infra restarts, %d user retries (%s); want Succeeded at %d after %d",
			name, res.Phase, res.Attempt, res.InfraRestarts, res.UserRetries, res.Reason, n+1, n)
	}
	return res
}

// TestLimitsOnRealServer: on a real Temporal dev server with its default
// limits, a 256 × 8 gang preempted 100 times, each time once all 256
// members run, ends Succeeded; every workflow run's history stays under
// Temporal's warning of 10,240 events, and the input each run hands the
// next and the job's result under the 2 MB payload limit. A small job with
// a tight budget continues as new after every attempt first; its first and
// last runs are the replay test's saved histories (-update-histories).
func TestLimitsOnRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	preemptions := 100
	if v := os.Getenv("GANGWAY_TEST_PREEMPTIONS"); v != "" {
		// Fewer while working on it; the test's claim is 100.
		preemptions, _ = strconv.Atoi(v)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	c := startSim(t)

	small := c.preemptEach(t, ctx, "small-continued", 2, 1, 4, workflows.Limits{RunEvents: 90})
	runs := workflowRuns(t, ctx, c.tc, "small-continued")
	if len(runs) < 3 || small.Runs != len(runs) {
		t.Fatalf("small-continued: %d runs in Temporal, %d in its status; want at least 3, the same", len(runs), small.Runs)
	}
	if *updateHistories {
		// The first run, which continues as new, and the last, which
		// starts from a continued input and completes.
		saveHistory(t, runs[0].history, "continued-first")
		saveHistory(t, runs[len(runs)-1].history, "continued-last")
	}

	const name = "gang-256x8"
	began := time.Now()
	res := c.preemptEach(t, ctx, name, 256, 8, preemptions, workflows.Limits{})
	took := time.Since(began)
	runs = workflowRuns(t, ctx, c.tc, name)
	if res.Runs != len(runs) {
		t.Errorf("%d runs in Temporal, %d in the status", len(runs), res.Runs)
	}
	maxEvents, maxInput := 0, 0
	for i, r := range runs {
		maxEvents, maxInput = max(maxEvents, len(r.history.Events)), max(maxInput, r.input)
		if n := len(r.history.Events); n >= temporalWarnEvents {
			t.Errorf("run %d has %d history events, want under %d", i+1, n, temporalWarnEvents)
		}
		if r.input >= temporalBlobBytes {
			t.Errorf("run %d started with a %d-byte input, want under %d", i+1, r.input, temporalBlobBytes)
		}
	}
	result := runs[len(runs)-1].result
	if result == 0 || result >= temporalBlobBytes {
		t.Errorf("the result is %d bytes, want under %d", result, temporalBlobBytes)
	}
	earlier := 0
	if res.EarlierAttempts != nil {
		earlier = res.EarlierAttempts.Count
	}
	t.Logf("%s preempted %d times in %s: %d attempts in %d workflow runs, at most %d history events in a run, "+
		"largest run input %d bytes, result %d bytes; the status keeps %d attempt records (%d summed) and %d phase changes (%d dropped)",
		name, res.InfraRestarts, took.Round(time.Second), res.Attempt, len(runs), maxEvents, maxInput, result,
		len(res.Attempts), earlier, len(res.Phases), res.EarlierPhases)
}

// run is one workflow run of a job as Temporal stored it.
type run struct {
	history *historypb.History
	// input is the size of the run's input; result the size of its
	// result (0 unless it completed).
	input, result int
}

// workflowRuns walks a closed job's runs from the first to the last,
// following each run's start event back to the run it continued.
func workflowRuns(t *testing.T, ctx context.Context, tc tclient.Client, id string) []run {
	t.Helper()
	d, err := tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	var runs []run
	for runID := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(); runID != ""; {
		h := &historypb.History{}
		it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatalf("history of %s run %s: %v", id, runID, err)
			}
			h.Events = append(h.Events, e)
		}
		start := h.Events[0].GetWorkflowExecutionStartedEventAttributes()
		r := run{history: h, input: proto.Size(start.GetInput())}
		if last := h.Events[len(h.Events)-1]; last.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
			r.result = proto.Size(last.GetWorkflowExecutionCompletedEventAttributes().GetResult())
		}
		runs = append([]run{r}, runs...)
		runID = start.GetContinuedExecutionRunId()
	}
	return runs
}

// saveHistory writes one run's history for the replay test.
func saveHistory(t *testing.T, h *historypb.History, name string) {
	t.Helper()
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "histories", name+".json")
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d events)", path, len(h.Events))
}
