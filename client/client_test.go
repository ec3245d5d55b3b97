package client_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/internal/server"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// stack is a real Temporal dev server and a real redis-server with a fleet
// of 4 × 8 H100 registered, and a client over both. No worker runs unless a
// test starts one, so a submitted job's workflow just sits in Temporal.
type stack struct {
	tc   tclient.Client
	view *capacity.View
	c    *client.Client
}

func newStack(t *testing.T) *stack {
	t.Helper()
	ts := devstacktest.Temporal(t)
	r := devstacktest.Redis(t)

	tc, err := tclient.Dial(tclient.Options{
		HostPort:  ts.Addr,
		Namespace: ts.Namespace,
		Logger:    tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		t.Fatalf("dial temporal: %v", err)
	}
	t.Cleanup(tc.Close)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	view := capacity.New(rdb, capacity.Options{})

	for _, n := range agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 4, GPUs: 8, Model: "H100"}}) {
		if err := view.RegisterNode(t.Context(), n); err != nil {
			t.Fatalf("register %s: %v", n.ID, err)
		}
	}
	return &stack{tc: tc, view: view, c: client.New(jobs.New(tc), view)}
}

// startWorker runs JobWorkflow and the server-side activities (enqueue,
// dequeue, release) on the stack, but no dispatch loop: jobs queue and are
// never placed.
func (s *stack) startWorker(t *testing.T) {
	t.Helper()
	w := worker.New(s.tc, workflows.TaskQueue, worker.Options{})
	server.Register(w, server.Deps{View: s.view, Log: slog.New(slog.DiscardHandler)})
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(w.Stop)
}

// spec is a valid job: 2 × 8 GPUs of any model for team ml.
func spec(name string) gangway.JobSpec {
	return gangway.JobSpec{
		Name:    name,
		Team:    "ml",
		Command: []string{"python", "train.py"},
		Gang:    gangway.Gang{Replicas: 2, GPUsPerReplica: 8},
	}
}

// describe returns the job's workflow description, or the error Temporal
// gave (a *serviceerror.NotFound when there is no such workflow).
func describe(t *testing.T, tc tclient.Client, id string) (*descResult, error) {
	t.Helper()
	d, err := tc.DescribeWorkflowExecution(t.Context(), id, "")
	if err != nil {
		return nil, err
	}
	info := d.GetWorkflowExecutionInfo()
	res := &descResult{
		RunID:     info.GetExecution().GetRunId(),
		Type:      info.GetType().GetName(),
		TaskQueue: d.GetExecutionConfig().GetTaskQueue().GetName(),
		Status:    info.GetStatus(),
	}
	dc := converter.GetDefaultDataConverter()
	fields := info.GetMemo().GetFields()
	for k, dst := range map[string]any{workflows.MemoPhase: &res.Memo.Phase, workflows.MemoTeam: &res.Memo.Team, workflows.MemoGPUs: &res.Memo.GPUs} {
		if err := dc.FromPayload(fields[k], dst); err != nil {
			t.Fatalf("decode memo %s of %s: %v", k, id, err)
		}
	}
	return res, nil
}

type descResult struct {
	RunID     string
	Type      string
	TaskQueue string
	Status    enumspb.WorkflowExecutionStatus
	Memo      memo
}

type memo struct {
	Phase string
	Team  string
	GPUs  int
}

// assertNoWorkflow fails the test unless Temporal has no workflow with ID
// id: a rejected submission must queue nothing.
func assertNoWorkflow(t *testing.T, tc tclient.Client, id string) {
	t.Helper()
	_, err := describe(t, tc, id)
	var nf *serviceerror.NotFound
	if !errors.As(err, &nf) {
		t.Errorf("describe %s after a rejected submit: err = %v, want NotFound (nothing queued)", id, err)
	}
}

// waitFor polls cond until it holds or 15 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSubmitRejects checks that a bad spec, or one the fleet could never
// hold, fails with a *gangway.SpecError naming the field and starts nothing.
func TestSubmitRejects(t *testing.T) {
	s := newStack(t)
	tests := []struct {
		name       string
		edit       func(*gangway.JobSpec)
		wantFields []string
	}{
		{
			name:       "too many GPUs per replica",
			edit:       func(j *gangway.JobSpec) { j.Gang.GPUsPerReplica = 12 },
			wantFields: []string{"gang.gpusPerReplica"},
		},
		{
			name:       "empty command",
			edit:       func(j *gangway.JobSpec) { j.Command = nil },
			wantFields: []string{"command"},
		},
		{
			name:       "bad team",
			edit:       func(j *gangway.JobSpec) { j.Team = "ML_Team" },
			wantFields: []string{"team"},
		},
		{
			name:       "several problems",
			edit:       func(j *gangway.JobSpec) { j.Team, j.Command = "", nil },
			wantFields: []string{"team", "command"},
		},
		{
			name:       "gang larger than the fleet",
			edit:       func(j *gangway.JobSpec) { j.Gang.Replicas, j.Gang.GPUModels = 5, []string{"H100"} },
			wantFields: []string{"gang"},
		},
		{
			name:       "model the fleet lacks",
			edit:       func(j *gangway.JobSpec) { j.Gang.GPUModels = []string{"A100"} },
			wantFields: []string{"gang.gpuModels"},
		},
		{
			name:       "pool the fleet lacks",
			edit:       func(j *gangway.JobSpec) { j.Pools = []string{"aws"} },
			wantFields: []string{"pools"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := spec("rejected-" + string(rune('a'+i)))
			tt.edit(&j)
			id, err := s.c.Submit(t.Context(), j, client.SubmitOptions{})
			var se *gangway.SpecError
			if !errors.As(err, &se) {
				t.Fatalf("Submit = %q, %v; want a *gangway.SpecError", id, err)
			}
			if !errors.Is(err, gangway.ErrInvalidSpec) {
				t.Errorf("errors.Is(%v, ErrInvalidSpec) = false", err)
			}
			if diff := cmp.Diff(tt.wantFields, se.Fields()); diff != "" {
				t.Errorf("fields mismatch (-want +got):\n%s\nerror: %v", diff, err)
			}
			if id != "" {
				t.Errorf("Submit returned ID %q with an error", id)
			}
			assertNoWorkflow(t, s.tc, j.Name)
		})
	}
}

// TestSubmitStarts checks what a valid submission starts: a workflow whose
// ID is the job name, on the server's task queue, with the memo `list`
// reads and the defaulted spec and timing as its input.
func TestSubmitStarts(t *testing.T) {
	s := newStack(t)
	tests := []struct {
		name       string
		spec       gangway.JobSpec
		opts       client.SubmitOptions
		wantDesc   descResult
		wantPrio   string
		wantTiming workflows.Timing
	}{
		{
			name: "any model",
			spec: spec("train-a"),
			wantDesc: descResult{
				Type: workflows.WorkflowName, TaskQueue: workflows.TaskQueue,
				Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
				Memo:   memo{Phase: string(gangway.PhaseSubmitted), Team: "ml", GPUs: 16},
			},
			wantPrio: gangway.PriorityNormal,
		},
		{
			name: "whole fleet of H100, high priority, custom timing",
			spec: func() gangway.JobSpec {
				j := spec("train-b")
				j.Team, j.PriorityClass = "vision", gangway.PriorityHigh
				j.Gang.Replicas, j.Gang.GPUModels = 4, []string{"H100"}
				return j
			}(),
			opts: client.SubmitOptions{Timing: workflows.Timing{HeartbeatTimeout: 3 * time.Second, StartTimeout: 20 * time.Second}},
			wantDesc: descResult{
				Type: workflows.WorkflowName, TaskQueue: workflows.TaskQueue,
				Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
				Memo:   memo{Phase: string(gangway.PhaseSubmitted), Team: "vision", GPUs: 32},
			},
			wantPrio:   gangway.PriorityHigh,
			wantTiming: workflows.Timing{HeartbeatTimeout: 3 * time.Second, StartTimeout: 20 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := s.c.Submit(t.Context(), tt.spec, tt.opts)
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			if diff := cmp.Diff(tt.spec.Name, id); diff != "" {
				t.Errorf("job ID mismatch (-want +got):\n%s", diff)
			}
			got, err := describe(t, s.tc, tt.spec.Name)
			if err != nil {
				t.Fatalf("describe: %v", err)
			}
			if diff := cmp.Diff(tt.wantDesc, *got, cmpopts.IgnoreFields(descResult{}, "RunID")); diff != "" {
				t.Errorf("workflow mismatch (-want +got):\n%s", diff)
			}

			in := startInput(t, s.tc, id)
			if diff := cmp.Diff(tt.wantTiming, in.Timing); diff != "" {
				t.Errorf("timing mismatch (-want +got):\n%s", diff)
			}
			// The workflow gets the spec with defaults filled in.
			want := tt.spec
			want.Default()
			if diff := cmp.Diff(want, in.Spec); diff != "" {
				t.Errorf("spec mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantPrio, in.Spec.PriorityClass); diff != "" {
				t.Errorf("priority class mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// startInput decodes the JobInput the job's workflow was started with.
func startInput(t *testing.T, tc tclient.Client, id string) workflows.JobInput {
	t.Helper()
	it := tc.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := it.Next()
	if err != nil {
		t.Fatalf("history of %s: %v", id, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		t.Fatalf("first event of %s is %v, want WorkflowExecutionStarted", id, ev.GetEventType())
	}
	var in workflows.JobInput
	if err := converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in); err != nil {
		t.Fatalf("decode input of %s: %v", id, err)
	}
	return in
}

// TestSubmitDuplicate checks that a job name is taken for good: a second
// submit fails with ErrJobExists and leaves the one run as it was.
func TestSubmitDuplicate(t *testing.T) {
	s := newStack(t)
	tests := []struct {
		name string
		// end, if set, ends the first run before the second submit.
		end        func(t *testing.T, id string)
		wantStatus enumspb.WorkflowExecutionStatus
	}{
		{
			name:       "while running",
			wantStatus: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		},
		{
			name: "after it ended",
			end: func(t *testing.T, id string) {
				if err := s.tc.TerminateWorkflow(t.Context(), id, "", "test"); err != nil {
					t.Fatalf("terminate: %v", err)
				}
			},
			wantStatus: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := spec("dup-" + string(rune('a'+i)))
			if _, err := s.c.Submit(t.Context(), first, client.SubmitOptions{}); err != nil {
				t.Fatalf("first Submit: %v", err)
			}
			if tt.end != nil {
				tt.end(t, first.Name)
			}
			before, err := describe(t, s.tc, first.Name)
			if err != nil {
				t.Fatalf("describe: %v", err)
			}

			// Same name, different job: still refused.
			second := first
			second.Team = "other"
			second.Gang.Replicas = 1
			id, err := s.c.Submit(t.Context(), second, client.SubmitOptions{})
			if !errors.Is(err, client.ErrJobExists) {
				t.Fatalf("second Submit = %q, %v; want ErrJobExists", id, err)
			}
			if id != "" {
				t.Errorf("second Submit returned ID %q with an error", id)
			}

			after, err := describe(t, s.tc, first.Name)
			if err != nil {
				t.Fatalf("describe: %v", err)
			}
			// The latest run is still the first one, unchanged.
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("workflow changed by a refused submit (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStatus, after.Status); diff != "" {
				t.Errorf("status mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(memo{Phase: string(gangway.PhaseSubmitted), Team: "ml", GPUs: 16}, after.Memo); diff != "" {
				t.Errorf("memo mismatch (-want +got):\n%s", diff)
			}
			runs := countRuns(t, s.tc, first.Name)
			if diff := cmp.Diff(1, runs); diff != "" {
				t.Errorf("runs of %s mismatch (-want +got):\n%s", first.Name, diff)
			}
		})
	}
}

// countRuns counts the runs, open or closed, of workflow id, once
// visibility has caught up with the first one.
func countRuns(t *testing.T, tc tclient.Client, id string) int {
	t.Helper()
	var n int
	waitFor(t, "visibility to show "+id, func() bool {
		resp, err := tc.CountWorkflow(t.Context(), &workflowservice.CountWorkflowExecutionsRequest{Query: "WorkflowId = '" + id + "'"})
		if err != nil {
			t.Fatalf("count runs of %s: %v", id, err)
		}
		n = int(resp.GetCount())
		return n > 0
	})
	return n
}

func TestUnknownJob(t *testing.T) {
	s := newStack(t)
	tests := []struct {
		name string
		call func(ctx context.Context, id string) error
	}{
		{"Status", func(ctx context.Context, id string) error { _, err := s.c.Status(ctx, id); return err }},
		{"Cancel", func(ctx context.Context, id string) error { return s.c.Cancel(ctx, id) }},
		{"Result", func(ctx context.Context, id string) error { _, err := s.c.Result(ctx, id); return err }},
		{"Logs", func(ctx context.Context, id string) error { _, err := s.c.Logs(ctx, id, "", 0); return err }},
		{"FollowLogs", func(ctx context.Context, id string) error {
			return s.c.FollowLogs(ctx, id, false, func(gangway.LogLine) {})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := tt.call(ctx, "no-such-job")
			if !errors.Is(err, client.ErrJobNotFound) {
				t.Fatalf("%s(no-such-job) = %v, want ErrJobNotFound", tt.name, err)
			}
			if want := `no job named "no-such-job"`; err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
		})
	}
}

func TestList(t *testing.T) {
	s := newStack(t)
	var specs []gangway.JobSpec
	for _, e := range []struct {
		name, team string
		replicas   int
		gpus       int
	}{
		{"list-a", "ml", 2, 8},
		{"list-b", "vision", 1, 4},
		{"list-c", "speech", 3, 2},
	} {
		j := spec(e.name)
		j.Team, j.Gang.Replicas, j.Gang.GPUsPerReplica = e.team, e.replicas, e.gpus
		specs = append(specs, j)
	}
	before := time.Now()
	for _, j := range specs {
		if _, err := s.c.Submit(t.Context(), j, client.SubmitOptions{}); err != nil {
			t.Fatalf("Submit %s: %v", j.Name, err)
		}
	}
	var got []client.Summary
	waitFor(t, "List to show 3 jobs", func() bool {
		var err error
		got, err = s.c.List(t.Context())
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		return len(got) >= len(specs)
	})

	want := []client.Summary{
		{JobID: "list-c", Team: "speech", Phase: gangway.PhaseSubmitted, GPUs: 6},
		{JobID: "list-b", Team: "vision", Phase: gangway.PhaseSubmitted, GPUs: 4},
		{JobID: "list-a", Team: "ml", Phase: gangway.PhaseSubmitted, GPUs: 16},
	}
	// Newest first; submit times come from the server's clock, so the test
	// checks them loosely.
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(client.Summary{}, "StartedAt")); diff != "" {
		t.Errorf("List mismatch (-want +got):\n%s", diff)
	}
	for _, sm := range got {
		if sm.StartedAt.Before(before.Add(-time.Minute)) || sm.StartedAt.After(time.Now().Add(time.Minute)) {
			t.Errorf("%s: StartedAt = %v, want about now", sm.JobID, sm.StartedAt)
		}
	}
	if !slices.IsSortedFunc(got, func(a, b client.Summary) int { return b.StartedAt.Compare(a.StartedAt) }) {
		t.Errorf("List is not newest first: %+v", got)
	}
}

// TestQueuedJob runs the job workflow on a worker with no dispatch loop: the
// job queues and waits, Status reports the dispatch loop's reason, and
// Cancel ends it Cancelled and takes it out of the queue.
func TestQueuedJob(t *testing.T) {
	s := newStack(t)
	s.startWorker(t)
	ctx := t.Context()
	const id = "queued"
	if _, err := s.c.Submit(ctx, spec(id), client.SubmitOptions{}); err != nil {
		t.Fatalf("Submit: %v", err)
	}

	type view struct {
		Phase   gangway.Phase
		Team    string
		Attempt int
		Waiting *gangway.Waiting
	}
	status := func() view {
		t.Helper()
		st, err := s.c.Status(ctx, id)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		return view{Phase: st.Phase, Team: st.Team, Attempt: st.Attempt, Waiting: st.Waiting}
	}
	waitFor(t, "the job to queue", func() bool { return status().Phase == gangway.PhaseQueued })
	if diff := cmp.Diff(view{Phase: gangway.PhaseQueued, Team: "ml", Attempt: 1}, status()); diff != "" {
		t.Errorf("status before a dispatch cycle mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{id}, queued(t, s.view)); diff != "" {
		t.Errorf("queue mismatch (-want +got):\n%s", diff)
	}

	reason := gangway.Waiting{Reason: "WaitingForReservation", Detail: "needs 2 × 8 H100, 1 node has 8 free", Retry: true,
		ReservationStart: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ReservedNodes: []string{"node-0", "node-1"}}
	if err := s.view.SetReasons(ctx, map[string]gangway.Waiting{id: reason}); err != nil {
		t.Fatalf("SetReasons: %v", err)
	}
	want := gangway.Waiting(reason)
	if diff := cmp.Diff(view{Phase: gangway.PhaseQueued, Team: "ml", Attempt: 1, Waiting: &want}, status()); diff != "" {
		t.Errorf("status after a dispatch cycle mismatch (-want +got):\n%s", diff)
	}

	if err := s.c.Cancel(ctx, id); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	res, err := s.c.Result(rctx, id)
	if err != nil {
		t.Fatalf("Result: %v", err)
	}
	var phases []gangway.Phase
	for _, p := range res.Phases {
		phases = append(phases, p.Phase)
	}
	wantPhases := []gangway.Phase{gangway.PhaseSubmitted, gangway.PhaseQueued, gangway.PhaseCancelled}
	if diff := cmp.Diff(wantPhases, phases); diff != "" {
		t.Errorf("phases mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(gangway.PhaseCancelled, res.Phase); diff != "" {
		t.Errorf("result phase mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string(nil), queued(t, s.view)); diff != "" {
		t.Errorf("queue after cancel mismatch (-want +got):\n%s", diff)
	}
	// A finished job's Status is its result, with no waiting reason.
	if diff := cmp.Diff(view{Phase: gangway.PhaseCancelled, Team: "ml", Attempt: 1}, status()); diff != "" {
		t.Errorf("status after cancel mismatch (-want +got):\n%s", diff)
	}
	// Cancelling a finished job changes nothing and says it has ended.
	if err := s.c.Cancel(ctx, id); !errors.Is(err, client.ErrJobEnded) {
		t.Errorf("Cancel of a finished job: %v, want ErrJobEnded", err)
	}

	// The memo follows the phase, so List shows the job Cancelled.
	waitFor(t, "List to show the job cancelled", func() bool {
		got, err := s.c.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		return len(got) == 1 && got[0].Phase == gangway.PhaseCancelled && !got[0].ClosedAt.IsZero()
	})
}

// queued returns the IDs of the jobs in the view's queue, in queue order.
func queued(t *testing.T, v *capacity.View) []string {
	t.Helper()
	q, err := v.Queue(t.Context())
	if err != nil {
		t.Fatalf("Queue: %v", err)
	}
	var ids []string
	for _, e := range q {
		ids = append(ids, e.JobID)
	}
	return ids
}

// TestLogs reads job output through the client. Logs live in Redis alone,
// so this test starts no Temporal server and gives the client none.
func TestLogs(t *testing.T) {
	r := devstacktest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	view := capacity.New(rdb, capacity.Options{})
	s := &stack{view: view, c: client.New(nil, view)}
	ctx := t.Context()
	const id = "logs"
	t0 := time.UnixMilli(1_750_000_000_000)
	lines := []gangway.LogLine{
		{Time: t0, Rank: 0, Attempt: 1, Text: "epoch 1"},
		{Time: t0.Add(time.Second), Rank: 1, Attempt: 1, Text: "epoch 1 on rank 1"},
		{Time: t0.Add(2 * time.Second), Rank: 0, Attempt: 2, Text: "resumed from checkpoint"},
	}
	for _, l := range lines {
		if err := s.view.AppendLog(ctx, id, gangway.LogLine(l)); err != nil {
			t.Fatalf("AppendLog: %v", err)
		}
	}
	all, err := s.c.Logs(ctx, id, "", 0)
	if err != nil {
		t.Fatalf("Logs: %v", err)
	}
	ignoreID := cmpopts.IgnoreFields(gangway.LogLine{}, "ID")
	if diff := cmp.Diff(lines, all, ignoreID); diff != "" {
		t.Fatalf("all lines mismatch (-want +got):\n%s", diff)
	}
	last := all[len(all)-1].ID

	tests := []struct {
		name  string
		job   string
		after string
		block time.Duration
		want  []gangway.LogLine
	}{
		{name: "from the start", job: id, want: lines},
		{name: "after the first line", job: id, after: all[0].ID, want: lines[1:]},
		{name: "after the last line", job: id, after: last, want: []gangway.LogLine{}},
		{name: "after the last line, blocking", job: id, after: last, block: 20 * time.Millisecond, want: []gangway.LogLine{}},
		{name: "from the start, blocking", job: id, block: time.Second, want: lines},
		{name: "unknown job", job: "no-such-job", want: []gangway.LogLine{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.c.Logs(ctx, tt.job, tt.after, tt.block)
			if err != nil {
				t.Fatalf("Logs: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, ignoreID); diff != "" {
				t.Errorf("lines mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("blocking read wakes on a new line", func(t *testing.T) {
		next := gangway.LogLine{Time: t0.Add(3 * time.Second), Rank: 0, Attempt: 2, Text: "epoch 2"}
		type result struct {
			lines []gangway.LogLine
			err   error
		}
		done := make(chan result, 1)
		go func() {
			// Whether the line lands before or during the wait, a read
			// after the last line returns it; the long block only bounds a
			// failure.
			l, err := s.c.Logs(ctx, id, last, 10*time.Second)
			done <- result{l, err}
		}()
		if err := s.view.AppendLog(ctx, id, gangway.LogLine(next)); err != nil {
			t.Fatalf("AppendLog: %v", err)
		}
		r := <-done
		if r.err != nil {
			t.Fatalf("Logs: %v", r.err)
		}
		if diff := cmp.Diff([]gangway.LogLine{next}, r.lines, ignoreID); diff != "" {
			t.Errorf("lines mismatch (-want +got):\n%s", diff)
		}
	})
}

// endedJobs is a job transport whose every job has ended Succeeded.
type endedJobs struct{ client.Jobs }

func (endedJobs) Describe(context.Context, string) (jobs.Description, error) {
	return jobs.Description{}, nil
}

func (endedJobs) Result(_ context.Context, id string) (workflows.Status, error) {
	return workflows.Status{JobID: id, Phase: gangway.PhaseSucceeded}, nil
}

// TestCancelEnded: cancelling a job that has ended changes nothing and
// says how it ended.
func TestCancelEnded(t *testing.T) {
	err := client.New(endedJobs{}, nil).Cancel(t.Context(), "done")
	if !errors.Is(err, client.ErrJobEnded) {
		t.Fatalf("Cancel(done) = %v, want ErrJobEnded", err)
	}
	if want := "job done has already ended (Succeeded); nothing to cancel"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestFollowLogs: following a job reads its lines until it has ended.
func TestFollowLogs(t *testing.T) {
	r := devstacktest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	view := capacity.New(rdb, capacity.Options{})
	c := client.New(endedJobs{}, view)
	ctx := t.Context()
	want := []string{"epoch 1", "epoch 2"}
	for _, text := range want {
		if err := view.AppendLog(ctx, "done", gangway.LogLine{Time: time.UnixMilli(1_750_000_000_000), Text: text}); err != nil {
			t.Fatalf("AppendLog: %v", err)
		}
	}
	for _, follow := range []bool{false, true} {
		var got []string
		if err := c.FollowLogs(ctx, "done", follow, func(l gangway.LogLine) { got = append(got, l.Text) }); err != nil {
			t.Fatalf("FollowLogs(follow %v): %v", follow, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("FollowLogs(follow %v) lines (-want +got):\n%s", follow, diff)
		}
	}
}

// TestWithoutView: a client with no fleet view still validates the spec on
// its own and submits (the fleet check is skipped), follows the job through
// Temporal, and says ErrNoView for what needs the fleet.
func TestWithoutView(t *testing.T) {
	s := newStack(t)
	s.startWorker(t)
	c := client.New(jobs.New(s.tc), nil)
	ctx := t.Context()

	bad := spec("no-view-bad")
	bad.Gang.Replicas = 0
	var se *gangway.SpecError
	if _, err := c.Submit(ctx, bad, client.SubmitOptions{}); !errors.As(err, &se) {
		t.Fatalf("Submit(bad spec) = %v, want a *gangway.SpecError", err)
	}
	j := spec("no-view")
	j.Gang.GPUModels = []string{"A100"} // the fleet has none; unchecked without a view
	if _, err := c.Submit(ctx, j, client.SubmitOptions{}); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	// The dispatch loop would say why it waits; this client cannot see it.
	why := gangway.Waiting{Reason: "ModelUnavailable", Detail: "no A100 in the fleet"}
	if err := s.view.SetReasons(ctx, map[string]gangway.Waiting{j.Name: why}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to queue", func() bool {
		st, err := c.Status(ctx, j.Name)
		if err != nil || st.Waiting != nil {
			t.Fatalf("Status = %+v, %v; want the job, no waiting reason", st, err)
		}
		return st.Phase == gangway.PhaseQueued
	})
	for name, err := range map[string]error{
		"Cordon":     c.Cordon(ctx, "node-0"),
		"Uncordon":   c.Uncordon(ctx, "node-0"),
		"Drain":      func() error { _, err := c.Drain(ctx, "node-0"); return err }(),
		"Logs":       func() error { _, err := c.Logs(ctx, j.Name, "", 0); return err }(),
		"Nodes":      func() error { _, err := c.Nodes(ctx); return err }(),
		"RemoveNode": c.RemoveNode(ctx, "node-0"),
	} {
		if !errors.Is(err, client.ErrNoView) {
			t.Errorf("%s = %v, want ErrNoView", name, err)
		}
	}
}

// TestNodes: the client lists the fleet with each node's state, and cordon
// and uncordon change it.
func TestNodes(t *testing.T) {
	r := devstacktest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	view := capacity.New(rdb, capacity.Options{})
	ctx := t.Context()
	fleet := agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 2, GPUs: 8, Model: "H100"}})
	start := time.Now().Truncate(time.Millisecond)
	for _, n := range fleet {
		if err := view.RegisterNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	c := client.New(nil, view)
	if err := c.Cordon(ctx, fleet[1].ID); err != nil {
		t.Fatal(err)
	}
	states := func() map[string]string {
		t.Helper()
		nodes, err := c.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, n := range nodes {
			got[n.Node.ID] = n.State
			if len(n.Node.GPUs) != 8 || n.LastHeartbeat.Before(start) {
				t.Errorf("node %s: %d GPUs, heartbeat %v; want 8, no earlier than %v", n.Node.ID, len(n.Node.GPUs), n.LastHeartbeat, start)
			}
		}
		return got
	}
	want := map[string]string{fleet[0].ID: gangway.NodeReady, fleet[1].ID: gangway.NodeCordoned}
	if diff := cmp.Diff(want, states()); diff != "" {
		t.Errorf("after cordon (-want +got):\n%s", diff)
	}
	if err := c.Uncordon(ctx, fleet[1].ID); err != nil {
		t.Fatal(err)
	}
	want[fleet[1].ID] = gangway.NodeReady
	if diff := cmp.Diff(want, states()); diff != "" {
		t.Errorf("after uncordon (-want +got):\n%s", diff)
	}
}

// TestRemoveNode: a node leaves the fleet once its agent has stopped and
// no job holds its GPUs; before that the removal is refused, saying why.
func TestRemoveNode(t *testing.T) {
	r := devstacktest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	view := capacity.New(rdb, capacity.Options{})
	ctx := t.Context()
	fleet := agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 3, GPUs: 8, Model: "H100"}})
	for _, n := range fleet {
		if err := view.RegisterNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	// train holds node-1's GPUs; the agents of node-1 and node-2 stopped.
	if ok, err := view.AcquireLease(ctx, "leader", time.Minute); !ok || err != nil {
		t.Fatalf("lease: %t %v", ok, err)
	}
	e := gangway.QueueEntry{JobID: "train", Team: "ml", Attempt: 1, Replicas: 1, GPUsPerReplica: 8, SubmittedAt: time.Now(), EnqueuedAt: time.Now()}
	if _, err := view.Enqueue(ctx, e); err != nil {
		t.Fatal(err)
	}
	a := gangway.Assignment{JobID: "train", Attempt: 1, Members: []gangway.Member{{NodeID: "node-1", Pool: "onprem", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	if err := view.Commit(ctx, "leader", []gangway.Assignment{a}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"node-1", "node-2"} {
		if err := view.ForgetHeartbeat(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	c := client.New(nil, view)
	for node, want := range map[string]string{
		"node-0": "node in use: node-0 is ready, its agent heartbeating (last 0s ago); stop the agent first, or it registers the node again",
		"node-1": "node in use: jobs train hold GPUs of node-1; drain it first",
	} {
		if err := c.RemoveNode(ctx, node); !errors.Is(err, client.ErrNodeInUse) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("RemoveNode(%s) = %v; want ErrNodeInUse: %q", node, err, want)
		}
	}
	if err := c.RemoveNode(ctx, "node-2"); err != nil {
		t.Fatalf("RemoveNode(node-2) = %v", err)
	}
	nodes, err := view.FleetNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	if diff := cmp.Diff([]string{"node-0", "node-1"}, ids); diff != "" {
		t.Errorf("the fleet after removing node-2 (-want +got):\n%s", diff)
	}
	if err := c.RemoveNode(ctx, "node-2"); !errors.Is(err, capacity.ErrNotFound) {
		t.Errorf("removing node-2 again = %v, want not found", err)
	}
}
