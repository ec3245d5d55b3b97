package agent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

// hungLogs is a view whose log stream hangs: every append waits for its
// context, as a command to a stopped Redis does.
type hungLogs struct {
	fakeCapacity
	calls atomic.Int64
}

func (h *hungLogs) AppendLog(ctx context.Context, _ gangway.JobID, _ gangway.LogLine) error {
	h.calls.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

type dropCount struct{ n atomic.Int64 }

func (d *dropCount) Dropped(lines int) { d.n.Add(int64(lines)) }

// TestTaskOutputNeverWaitsForRedis: with the log stream hung, a task's
// output still goes to its log file at once, whole, and the lines the
// stream could not take are counted as dropped, every one of them.
func TestTaskOutputNeverWaitsForRedis(t *testing.T) {
	drops := &dropCount{}
	view := &hungLogs{}
	a := New(Config{Node: FakeNode("n", "p", "h", 1, "H100"), LogDrops: drops}, view)
	path := filepath.Join(t.TempDir(), "task.log")
	o, err := newTaskOutput(path, nil, a, workflows.RunTaskInput{JobID: "chatty"})
	if err != nil {
		t.Fatal(err)
	}
	const lines = 3 * logBuffer
	start := time.Now()
	var want bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if _, err := o.Write(want.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waits logCloseWait at most for the stream, never for Redis.
	if took := time.Since(start); took > drainTimeout+logCloseWait {
		t.Errorf("writing and closing took %v with the stream hung", took)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the log file has %d bytes, want all %d lines (%v)", len(got), lines, err)
	}
	// Every line not appended is counted once the hung append gives up.
	deadline := time.Now().Add(logAppendTimeout + 5*time.Second)
	for drops.n.Load() != lines && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := drops.n.Load(); n != lines {
		t.Errorf("%d lines counted as dropped, want %d (appends tried %d, all failed)", n, lines, view.calls.Load())
	}
}
