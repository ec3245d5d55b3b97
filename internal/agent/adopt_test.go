package agent

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/gangwayhq/gangway/workflows"
)

func TestLostTrack(t *testing.T) {
	cancelled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	expired, stop := context.WithTimeout(context.Background(), -time.Second)
	defer stop()
	tests := map[string]struct {
		ctx  context.Context
		want bool
	}{
		"running":                            {ctx: context.Background(), want: false},
		"the workflow cancelled it":          {ctx: cancelled(temporal.NewCanceledError()), want: false},
		"a plain cancel (worker stopping)":   {ctx: cancelled(nil), want: false},
		"its run time ran out":               {ctx: expired, want: false},
		"the server no longer knows it":      {ctx: cancelled(serviceerror.NewNotFound("activity not found")), want: true},
		"the server was unreachable":         {ctx: cancelled(serviceerror.NewUnavailable("connection refused")), want: true},
		"a heartbeat RPC that timed out":     {ctx: cancelled(context.DeadlineExceeded), want: true},
		"some other error the SDK cancelled": {ctx: cancelled(errors.New("x")), want: true},
	}
	for name, tc := range tests {
		if got := lostTrack(tc.ctx); got != tc.want {
			t.Errorf("%s: lostTrack = %t, want %t", name, got, tc.want)
		}
	}
}

// TestAdopt: a task Temporal lost track of keeps running and is adopted by
// a RunTask with Adopt set, which gets its result; adopting a task that
// ended returns how it ended (its exit code), without starting anything;
// a task the agent never ran is TaskUnknown.
func TestAdopt(t *testing.T) {
	h := newHarness(t)
	lost, loseTrack := context.WithCancelCause(context.Background())
	defer loseTrack(nil)
	in := h.task(writePID + `while [ ! -e "$PIDFILE.go" ]; do sleep 0.02; done; echo done`)
	first := h.start(in, withContext(lost))
	h.waitPGID(t)
	loseTrack(serviceerror.NewUnavailable("temporal is down"))

	adopt := in
	adopt.Adopt = true
	adopted := h.start(adopt)
	// Neither returns while the process runs: the first is orphaned, the
	// adopter attached.
	select {
	case o := <-first:
		t.Fatalf("the orphaned RunTask returned while its process ran: %v", o.err)
	case o := <-adopted:
		t.Fatalf("the adopting RunTask returned while the process ran: %v", o.err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := os.WriteFile(h.path("pid.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if o := wait(t, adopted); o.err != nil || o.res.StartedAt.IsZero() {
		t.Fatalf("adopting RunTask: %+v, %v; want the task's success", o.res, o.err)
	}
	wait(t, first)
	wantEvents(t, h.rec, []int{1, 3}, true, false) // started once, stopped once
	requireIdle(t, h.a)

	// Adopting it again returns the same end, starting nothing.
	if _, err := h.run(adopt); err != nil {
		t.Errorf("adopting the ended task: %v, want its success", err)
	}
	failed := h.task(`exit 3`)
	failed.JobID = "train-2"
	if _, err := h.run(failed); err == nil {
		t.Fatal("exit 3 succeeded")
	}
	failed.Adopt = true
	_, err := h.run(failed)
	if ae := appError(t, err, workflows.ErrTypeTaskFailed); !strings.Contains(ae.Message(), "exit code 3") {
		t.Errorf("adopting a task that exited 3: %q", ae.Message())
	}
	if n := len(h.rec.all()); n != 4 {
		t.Errorf("%d task events, want 4 (two tasks, each started and stopped once)", n)
	}

	ghost := h.task("true")
	ghost.JobID, ghost.Adopt = "never-ran", true
	_, err = h.run(ghost)
	appError(t, err, workflows.ErrTypeTaskUnknown)
}
