package agent

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway/workflows"
)

// signal is one SignalPreempt call.
type signal struct {
	JobID string
	Arg   workflows.PreemptRequest
}

// fakePreempter records signals; the first fails calls fail.
type fakePreempter struct {
	mu    sync.Mutex
	fails int
	calls []signal // successful ones
	tries int
	got   chan struct{} // one send per successful signal
}

func newFakePreempter(fails int) *fakePreempter {
	return &fakePreempter{fails: fails, got: make(chan struct{}, 100)}
}

func (s *fakePreempter) SignalPreempt(_ context.Context, jobID string, req workflows.PreemptRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	if s.fails > 0 {
		s.fails--
		return errors.New("temporal unreachable")
	}
	s.calls = append(s.calls, signal{jobID, req})
	s.got <- struct{}{}
	return nil
}

func (s *fakePreempter) all() []signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]signal(nil), s.calls...)
}

// waitSignals waits for n more successful signals.
func (s *fakePreempter) waitSignals(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-s.got:
		case <-time.After(5 * time.Second):
			t.Fatalf("no preempt signal within 5s; got %+v", s.all())
		}
	}
}

// startSleeper starts job's task on gpus, running until the test ends,
// and waits until its process runs.
func (h *harness) startSleeper(t *testing.T, job string, attempt int, gpus []int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := h.task(`touch "$PIDFILE.` + job + `"; sleep 300`)
	in.JobID, in.Attempt, in.GPUs = job, attempt, gpus
	done := h.start(in, withContext(ctx))
	t.Cleanup(func() {
		cancel()
		wait(t, done)
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(h.path("pid." + job)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s did not start within 5s", job)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNoticePreemptsRunningTasks: an interruption notice signals the
// workflow of every task on the node once per attempt, with the deadline,
// and so does a task that starts after it; a rebalance recommendation
// signals nothing.
func TestNoticePreemptsRunningTasks(t *testing.T) {
	notices := make(chan Notice)
	h := newCkptHarness(t, notices)
	sig := newFakePreempter(1) // the first try fails and is retried
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.a.watchNotices(ctx, sig)

	h.startSleeper(t, "train-a", 3, []int{0})
	h.startSleeper(t, "train-b", 1, []int{1, 2})
	notices <- Notice{Kind: NoticeRebalance, Source: "aws-imds", Detail: "noticeTime 2026-11-30T00:00:00Z"}
	deadline := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	n := Notice{Kind: NoticeInterruption, Deadline: deadline, Source: "aws-imds", Detail: "terminate"}
	notices <- n
	sig.waitSignals(t, 2)
	notices <- n // the same notice again: nothing new to say
	h.startSleeper(t, "train-c", 1, []int{3})
	sig.waitSignals(t, 1)

	req := func(attempt int) workflows.PreemptRequest {
		return workflows.PreemptRequest{Attempt: attempt, Cause: workflows.CauseNotice, NodeID: "n1",
			Deadline: deadline, Reason: "interruption notice from aws-imds: terminate"}
	}
	want := map[string]signal{
		"train-a": {"train-a", req(3)},
		"train-b": {"train-b", req(1)},
		"train-c": {"train-c", req(1)},
	}
	got := map[string]signal{}
	for _, s := range sig.all() {
		if _, dup := got[s.JobID]; dup {
			t.Errorf("workflow %s signalled twice", s.JobID)
		}
		got[s.JobID] = s
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
	if !h.a.noticeDeadline().Equal(deadline) {
		t.Errorf("node deadline %v, want %v", h.a.noticeDeadline(), deadline)
	}
}

// TestShutdownKeepsTimeForTheFinalSave: when the agent shuts down, a
// checkpointing task that ignores its stop signal is killed early enough
// that its final save fits in the shutdown grace, whatever its job asks.
func TestShutdownKeepsTimeForTheFinalSave(t *testing.T) {
	h := newCkptHarness(t, nil)
	h.a.cfg.ShutdownGrace = minUploadReserve + 2*time.Second
	stop := make(chan struct{})
	in := h.rank0(`trap '' TERM; `+writePID+`while :; do sleep 0.05; done`, 0)
	in.GracePeriod = 10 * time.Minute
	done := h.start(in, withWorkerStop(stop))
	pgid := h.waitPGID(t)
	stopped := time.Now()
	close(stop)
	wait(t, done)
	if took := time.Since(stopped); took < 2*time.Second || took > h.a.cfg.ShutdownGrace {
		t.Errorf("task stopped %v after the shutdown began, want about 2s: the grace less the final save's %v", took, minUploadReserve)
	}
	requireGroupGone(t, pgid)
}

// TestNoticeDeadlineShortensGrace: a task that ignores its stop signal is
// killed early enough to leave the final save time before the notice's
// deadline, whatever its grace period.
func TestNoticeDeadlineShortensGrace(t *testing.T) {
	notices := make(chan Notice)
	h := newCkptHarness(t, notices)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.a.watchNotices(ctx, newFakePreempter(0))
	notices <- Notice{Kind: NoticeInterruption, Deadline: time.Now().Add(minUploadReserve + 2*time.Second), Source: "gcp-metadata"}

	tctx, tcancel := context.WithCancel(context.Background())
	defer tcancel()
	in := h.rank0(`trap '' TERM; `+writePID+`while :; do sleep 0.05; done`, 0)
	in.GracePeriod = DefaultShutdownGrace
	done := h.start(in, withContext(tctx))
	pgid := h.waitPGID(t)
	stopped := time.Now()
	tcancel()
	wait(t, done) // fails the test if it took the whole grace period
	if took := time.Since(stopped); took > minUploadReserve+2*time.Second {
		t.Errorf("task stopped %v after cancel, past the notice's deadline", took)
	}
	requireGroupGone(t, pgid)
}
