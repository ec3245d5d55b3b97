package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.temporal.io/sdk/activity"

	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/workflows"
)

// observer keeps every checkpoint transfer the agent reports.
type observer struct {
	mu        sync.Mutex
	transfers []CheckpointTransfer
}

func (o *observer) ObserveCheckpoint(t CheckpointTransfer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.transfers = append(o.transfers, t)
}

func (o *observer) all() []CheckpointTransfer {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]CheckpointTransfer(nil), o.transfers...)
}

// ckptHarness is the harness with a file:// checkpoint store, an observer
// and quick polls and heartbeats.
type ckptHarness struct {
	*harness
	store checkpoint.Store
	obs   *observer
}

func newCkptHarness(t *testing.T, notices <-chan Notice) *ckptHarness {
	t.Helper()
	h := &ckptHarness{harness: newHarness(t), obs: &observer{}}
	var err error
	h.store, err = checkpoint.Open(context.Background(), "file://"+t.TempDir(), checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.a = New(Config{
		Node:               FakeNode("n1", "onprem", "10.0.0.1", 4, "H100"),
		DataDir:            h.dataDir,
		Recorder:           h.rec,
		Checkpoints:        h.store,
		CheckpointObserver: h.obs,
		CheckpointPoll:     20 * time.Millisecond,
		TaskHeartbeat:      20 * time.Millisecond,
		Notices:            notices,
	}, h.cap)
	return h
}

// rank0 is h.task as the gang's rank 0, checkpointing, keeping keep.
func (h *ckptHarness) rank0(script string, keep int) workflows.RunTaskInput {
	in := h.task(script)
	in.Rank, in.Checkpoint, in.Keep = 0, true, keep
	return in
}

// saved lists the job's committed checkpoints' steps, newest first.
func (h *ckptHarness) saved(t *testing.T) []int64 {
	t.Helper()
	ms, err := h.store.List(context.Background(), "train-1")
	if err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, m := range ms {
		if m.Step == nil {
			t.Fatalf("checkpoint %s has no step", m.ID)
		}
		steps = append(steps, *m.Step)
	}
	return steps
}

// watchHeartbeats hands every heartbeat's progress to fn. (Temporal's
// test environment batches heartbeats for 30 s; production sends them.)
func (h *ckptHarness) watchHeartbeats(fn func(workflows.RunTaskProgress)) {
	h.a.recordHeartbeat = func(ctx context.Context, details ...any) {
		if len(details) == 1 {
			if p, ok := details[0].(workflows.RunTaskProgress); ok {
				fn(p)
			}
		}
		activity.RecordHeartbeat(ctx, details...)
	}
}

// writeCkpt is a shell function the test scripts use: ckpt STEP writes a
// checkpoint subdirectory with a step file and some payload, marks it
// complete, and waits until the agent has taken it over.
const writeCkpt = `ckpt() {
	d="$GANGWAY_CHECKPOINT_DIR/step-$1"; mkdir -p "$d/model"
	echo "$1" > "$d/step"; head -c 4096 /dev/zero > "$d/model/weights.bin"
	touch "$d/COMPLETE"
	while [ -e "$d" ]; do sleep 0.01; done
}; `

func TestRunTaskResumes(t *testing.T) {
	h := newCkptHarness(t, nil)
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "model"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"step": "40\n", "model/weights.bin": "w40"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := h.store.Save(context.Background(), "train-1", src, checkpoint.Manifest{Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}

	// Rank 1 restores too: every rank starts from the same state.
	in := h.task(`echo "resume=$GANGWAY_RESUME_DIR"; echo "step=$(cat "$GANGWAY_RESUME_DIR/step")"; ` +
		`echo "weights=$(cat "$GANGWAY_RESUME_DIR/model/weights.bin")"; ls -A "$GANGWAY_RESUME_DIR" | tr '\n' ' '`)
	in.Checkpoint, in.ResumeFrom = true, m.ID
	if _, err := h.run(in); err != nil {
		t.Fatalf("RunTask: %v", err)
	}
	var got []string
	for _, l := range h.cap.logLines("train-1") {
		got = append(got, l.Text)
	}
	want := []string{
		"resume=" + filepath.Join(h.dataDir, "tasks", "train-1", "attempt-2-rank-1", "resume"),
		"step=40", "weights=w40", "model step ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("task output (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]CheckpointTransfer{{Op: OpRestore, JobID: "train-1", Attempt: 2, Rank: 1, ID: m.ID,
		Step: m.Step, Bytes: m.TotalBytes}}, h.obs.all(), cmpopts.IgnoreFields(CheckpointTransfer{}, "Duration")); diff != "" {
		t.Errorf("observed transfers (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(h.dataDir, "tasks", "train-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.dataDir, "tasks", "train-1", "attempt-2-rank-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the task's directory is left after it ended (stat: %v)", err)
	}
}

func TestRunTaskRestoreFails(t *testing.T) {
	cases := map[string]struct {
		noStore    bool
		resumeFrom string
		wantIn     []string
	}{
		"checkpoint not in the store": {
			resumeFrom: "00000000000000000001-a1-0123abcd",
			wantIn:     []string{"00000000000000000001-a1-0123abcd", "not found"},
		},
		"node without a store": {
			noStore:    true,
			resumeFrom: "00000000000000000001-a1-0123abcd",
			wantIn:     []string{"node n1 has no checkpoint store"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newCkptHarness(t, nil)
			if tc.noStore {
				h.a.cfg.Checkpoints = nil
			}
			in := h.rank0(`touch "$PIDFILE"`, 0)
			in.ResumeFrom = tc.resumeFrom
			_, err := h.run(in)
			msg := appError(t, err, workflows.ErrTypeRestoreFailed).Message()
			for _, part := range tc.wantIn {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q does not contain %q", msg, part)
				}
			}
			if _, err := os.Stat(h.path("pid")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the task ran without its checkpoint (stat: %v)", err)
			}
			wantEvents(t, h.rec, nil)
			requireIdle(t, h.a)
		})
	}
}

// TestRunTaskSavesPeriodicCheckpoints: each checkpoint rank 0 completes is
// saved, the job is pruned to Keep, and heartbeats carry the newest.
func TestRunTaskSavesPeriodicCheckpoints(t *testing.T) {
	h := newCkptHarness(t, nil)
	var mu sync.Mutex
	var beats []workflows.CheckpointRef
	h.watchHeartbeats(func(p workflows.RunTaskProgress) {
		mu.Lock()
		defer mu.Unlock()
		if n := len(beats); n == 0 || beats[n-1].ID != p.Checkpoint.ID {
			beats = append(beats, p.Checkpoint)
		}
	})
	// After each checkpoint the script waits for a heartbeat to carry it:
	// the agent saves it right after taking it over.
	script := writeCkpt + `for s in 1 2 3 4; do ckpt $s; sleep 0.15; done; ` +
		// an incomplete one is not saved
		`mkdir "$GANGWAY_CHECKPOINT_DIR/step-5"; echo 5 > "$GANGWAY_CHECKPOINT_DIR/step-5/step"`
	if _, err := h.run(h.rank0(script, 2)); err != nil {
		t.Fatalf("RunTask: %v", err)
	}

	if diff := cmp.Diff([]int64{4, 3}, h.saved(t)); diff != "" {
		t.Errorf("steps kept in the store (-want +got):\n%s", diff)
	}
	var savedSteps []int64
	for _, tr := range h.obs.all() {
		if tr.Op != OpSave || tr.Err != nil || tr.Final || tr.Step == nil || tr.Bytes != 4096+2 {
			t.Errorf("unexpected transfer %+v", tr)
			continue
		}
		savedSteps = append(savedSteps, *tr.Step)
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4}, savedSteps); diff != "" {
		t.Errorf("saves (-want +got):\n%s", diff)
	}
	h.cap.mu.Lock()
	recorded := slices.Clone(h.cap.checkpoints)
	h.cap.mu.Unlock()
	if diff := cmp.Diff([]string{"train-1/2", "train-1/2", "train-1/2", "train-1/2"}, recorded); diff != "" {
		t.Errorf("checkpoints recorded in the view (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	var beatSteps []int64
	for _, b := range beats {
		if b.ID == "" {
			continue
		}
		beatSteps = append(beatSteps, *b.Step)
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4}, beatSteps); diff != "" {
		t.Errorf("checkpoint steps the heartbeats carried, in order (-want +got):\n%s", diff)
	}
	latest, err := h.store.Latest(context.Background(), "train-1")
	if err != nil {
		t.Fatal(err)
	}
	if last := beats[len(beats)-1]; last.ID != latest.ID || last.Bytes != latest.TotalBytes || !last.At.Equal(latest.Captured()) {
		t.Errorf("last heartbeat carried %+v, want the latest checkpoint %s (%d bytes, %v)", last, latest.ID, latest.TotalBytes, latest.Captured())
	}
	for _, f := range latest.Files {
		if f.Path == CompleteMarker {
			t.Errorf("the completion marker was saved with the checkpoint")
		}
	}
}

// TestRunTaskCheckpointTimeIsWhenWritten: a checkpoint's time — in the
// store and the view, from which the work since it counts
// — is when the workload marked it complete, not when the agent got to
// uploading it (up to a poll interval and an earlier upload later): here
// the agent looks every 5 s, the process exits 0.5 s after its checkpoint
// and the final look saves it. A marker backdated past the agent's last
// look counts from that look: a job cannot make itself look dearer to
// preempt.
func TestRunTaskCheckpointTimeIsWhenWritten(t *testing.T) {
	for _, tc := range []struct {
		name     string
		backdate bool
	}{{"written before the exit", false}, {"marker backdated an hour", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newCkptHarness(t, nil)
			h.a.cfg.CheckpointPoll = 5 * time.Second
			touch := `touch "$d/COMPLETE"`
			if tc.backdate {
				touch = fmt.Sprintf(`touch -d @%d "$d/COMPLETE"`, time.Now().Add(-time.Hour).Unix())
			}
			began := time.Now()
			script := `d="$GANGWAY_CHECKPOINT_DIR/step-7"; mkdir -p "$d"; echo 7 > "$d/step"; ` + touch + `; sleep 0.5`
			if _, err := h.run(h.rank0(script, 2)); err != nil {
				t.Fatalf("RunTask: %v", err)
			}
			latest, err := h.store.Latest(context.Background(), "train-1")
			if err != nil {
				t.Fatal(err)
			}
			taken := latest.Captured()
			switch {
			case latest.Taken.IsZero() || !taken.Equal(latest.Taken):
				t.Errorf("stored checkpoint taken %v, created %v: want the taken time kept and used", latest.Taken, latest.Created)
			case taken.Before(began):
				t.Errorf("checkpoint taken %v, before the task began %v: a backdated marker counted", taken, began)
			case !tc.backdate && latest.Created.Sub(taken) < 400*time.Millisecond:
				t.Errorf("checkpoint taken %v, its save began %v: want the marker's time, 0.5 s before the save", taken, latest.Created)
			}
			h.cap.mu.Lock()
			recorded := slices.Clone(h.cap.checkpointAt)
			h.cap.mu.Unlock()
			if len(recorded) != 1 || !recorded[0].Equal(taken) {
				t.Errorf("checkpoint times recorded in the view %v, want [%v]", recorded, taken)
			}
		})
	}
}

// TestRunTaskOtherRanksDiscard: ranks other than 0 never save; their
// complete checkpoints are deleted so they do not fill the node's disk.
func TestRunTaskOtherRanksDiscard(t *testing.T) {
	h := newCkptHarness(t, nil)
	in := h.task(writeCkpt + `ckpt 1; ckpt 2; echo "left=$(ls -A "$GANGWAY_CHECKPOINT_DIR")"`)
	in.Checkpoint = true // rank 1
	if _, err := h.run(in); err != nil {
		t.Fatalf("RunTask: %v", err)
	}
	if got := h.saved(t); len(got) != 0 {
		t.Errorf("rank 1 saved checkpoints %v", got)
	}
	lines := h.cap.logLines("train-1")
	if len(lines) != 1 || lines[0].Text != "left=" {
		t.Errorf("output %+v, want the checkpoint directory emptied (left=)", lines)
	}
}

// TestRunTaskStopSavesFinalCheckpoint: on cancel the process gets its stop
// signal, writes a final checkpoint, and it is saved before RunTask
// returns.
func TestRunTaskStopSavesFinalCheckpoint(t *testing.T) {
	h := newCkptHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	script := `final() { d="$GANGWAY_CHECKPOINT_DIR/final"; mkdir "$d"; echo 17 > "$d/step"; ` +
		`head -c 1000 /dev/zero > "$d/state"; touch "$d/COMPLETE"; exit 143; }; trap final TERM; ` +
		writePID + `while :; do sleep 0.02; done`
	in := h.rank0(script, 0)
	in.GracePeriod = 5 * time.Second
	done := h.start(in, withContext(ctx))
	pgid := h.waitPGID(t)

	cancel()
	o := wait(t, done)
	if o.err == nil || !strings.Contains(o.err.Error(), context.Canceled.Error()) {
		t.Fatalf("RunTask after cancel returned %v, want the context's cancellation", o.err)
	}
	// Nothing waited for the save after RunTask returned: it is there.
	if diff := cmp.Diff([]int64{17}, h.saved(t)); diff != "" {
		t.Errorf("saved steps (-want +got):\n%s", diff)
	}
	tr := h.obs.all()
	if len(tr) != 1 || !tr[0].Final || tr[0].Bytes != 1003 || tr[0].Err != nil {
		t.Errorf("transfers %+v, want one final save of 1003 bytes", tr)
	}
	requireGroupGone(t, pgid)
	if ev := h.rec.all(); len(ev) != 2 || !ev[0].Start || ev[1].Start {
		t.Errorf("events %+v, want a start and a stop", ev)
	}
	requireIdle(t, h.a)
}

// TestStopTasks: a GPU fault stops the task on that GPU, its final
// checkpoint is saved, and RunTask fails with the type StopTasks named,
// carrying the checkpoint.
func TestStopTasks(t *testing.T) {
	h := newCkptHarness(t, nil)
	script := writeCkpt + `trap 'ckpt 9; exit 143' USR1; ckpt 8; ` + writePID + `while :; do sleep 0.02; done`
	in := h.rank0(script, 0)
	in.StopSignal, in.GracePeriod = "SIGUSR1", 5*time.Second
	done := h.start(in)
	h.waitPGID(t)

	want := []TaskInfo{{JobID: "train-1", Attempt: 2, Rank: 0, GPUs: []int{1, 3}, WorkflowID: "train-1"}}
	if diff := cmp.Diff(want, h.a.RunningTasks(), cmpopts.IgnoreFields(TaskInfo{}, "StartedAt")); diff != "" {
		t.Errorf("RunningTasks (-want +got):\n%s", diff)
	}
	if n := h.a.StopTasks([]int{0, 2}, workflows.ErrTypeGPUFault, "unused GPUs"); n != 0 {
		t.Errorf("StopTasks on other GPUs stopped %d tasks", n)
	}
	if n := h.a.StopTasks([]int{3}, workflows.ErrTypeGPUFault, "GPU 3: Xid 79 (fell off the bus)"); n != 1 {
		t.Errorf("StopTasks stopped %d tasks, want 1", n)
	}
	o := wait(t, done)
	ae := appError(t, o.err, workflows.ErrTypeGPUFault)
	if want := "GPU 3: Xid 79 (fell off the bus)"; ae.Message() != want {
		t.Errorf("message = %q, want %q", ae.Message(), want)
	}
	if diff := cmp.Diff([]int64{9, 8}, h.saved(t)); diff != "" {
		t.Errorf("saved steps (-want +got):\n%s", diff)
	}
	latest, err := h.store.Latest(context.Background(), "train-1")
	if err != nil {
		t.Fatal(err)
	}
	var p workflows.RunTaskProgress
	if err := ae.Details(&p); err != nil || p.Checkpoint.ID != latest.ID || p.Checkpoint.Step == nil || *p.Checkpoint.Step != 9 {
		t.Errorf("error details %+v (%v), want the final checkpoint %s at step 9", p, err, latest.ID)
	}
	if got := h.a.RunningTasks(); len(got) != 0 {
		t.Errorf("RunningTasks after the stop: %+v", got)
	}
	requireIdle(t, h.a)
}

// flakyStore fails the first saves it is asked for.
type flakyStore struct {
	checkpoint.Store
	mu    sync.Mutex
	fails int
}

func (s *flakyStore) Save(ctx context.Context, job, dir string, m checkpoint.Manifest) (checkpoint.Manifest, error) {
	s.mu.Lock()
	fail := s.fails > 0
	s.fails--
	s.mu.Unlock()
	if fail {
		return checkpoint.Manifest{}, errors.New("store unreachable")
	}
	return s.Store.Save(ctx, job, dir, m)
}

// TestRunTaskRetriesFailedSave: a save that fails keeps the local copy and
// is tried again on the next poll.
func TestRunTaskRetriesFailedSave(t *testing.T) {
	h := newCkptHarness(t, nil)
	h.a.cfg.Checkpoints = &flakyStore{Store: h.store, fails: 2}
	if _, err := h.run(h.rank0(writeCkpt+`ckpt 3; sleep 0.3`, 0)); err != nil {
		t.Fatalf("RunTask: %v", err)
	}
	if diff := cmp.Diff([]int64{3}, h.saved(t)); diff != "" {
		t.Errorf("saved steps (-want +got):\n%s", diff)
	}
	var errs int
	for _, tr := range h.obs.all() {
		if tr.Err != nil {
			errs++
		}
	}
	if errs != 2 {
		t.Errorf("%d failed saves observed, want 2: %+v", errs, h.obs.all())
	}
}

// gatedStore holds every save until release is closed, saying on saving
// that one has begun.
type gatedStore struct {
	checkpoint.Store
	saving  chan struct{}
	release chan struct{}
}

func (s *gatedStore) Save(ctx context.Context, job, dir string, m checkpoint.Manifest) (checkpoint.Manifest, error) {
	select {
	case s.saving <- struct{}{}:
	default:
	}
	<-s.release
	return s.Store.Save(ctx, job, dir, m)
}

// TestRunTaskRecordsExitBeforeTheLastSave: a task that exits 0 is
// recorded done while its last checkpoint is still being saved — an
// agent killed during the save must not cost the job a rerun.
func TestRunTaskRecordsExitBeforeTheLastSave(t *testing.T) {
	h := newCkptHarness(t, nil)
	gate := &gatedStore{Store: h.store, saving: make(chan struct{}, 1), release: make(chan struct{})}
	h.a.cfg.Checkpoints = gate
	script := `d="$GANGWAY_CHECKPOINT_DIR/step-9"; mkdir "$d"; echo 9 > "$d/step"; touch "$d/COMPLETE"; exit 0`
	done := h.start(h.rank0(script, 0))
	select {
	case <-gate.saving:
	case <-time.After(10 * time.Second):
		t.Fatal("no save began within 10s")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(h.cap.taskDone()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := h.cap.taskDone(); !slices.Equal(got, []string{"train-1/2/0"}) {
		t.Errorf("task-done records while the last save is held: %v, want train-1/2/0's", got)
	}
	close(gate.release)
	if o := wait(t, done); o.err != nil {
		t.Fatalf("RunTask: %v", o.err)
	}
	if got := h.cap.taskDone(); len(got) != 1 {
		t.Errorf("task-done records %v, want one", got)
	}
	if diff := cmp.Diff([]int64{9}, h.saved(t)); diff != "" {
		t.Errorf("saved steps (-want +got):\n%s", diff)
	}
}
