package agent

import (
	"context"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows"
)

// batchCapacity is fakeCapacity with the host's batched calls; the first
// HeartbeatNodes waits for release once it has been entered.
type batchCapacity struct {
	fakeCapacity
	entered, release chan struct{}
}

func (c *batchCapacity) RegisterNodes(context.Context, []gangway.Node) error { return nil }

func (c *batchCapacity) HeartbeatNodes(_ context.Context, beats []capacity.NodeBeat) ([]string, error) {
	if c.entered != nil {
		close(c.entered)
		c.entered = nil
		<-c.release
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range beats {
		c.heartbeats = append(c.heartbeats, b.ID)
		c.beatTasks = append(c.beatTasks, b.Tasks)
	}
	return nil, nil
}

// TestHostBeatDoesNotOverwriteExitBeat: a node's beat as its task ends
// waits for a batch already under way, which read the task still running,
// so the view is left with the later word: no task.
func TestHostBeatDoesNotOverwriteExitBeat(t *testing.T) {
	c := &batchCapacity{entered: make(chan struct{}), release: make(chan struct{})}
	h, err := NewHost(HostConfig{ID: "h1", Nodes: []gangway.Node{FakeNode("n1", "onprem", "10.0.0.1", 4, "H100")},
		Agent: Config{DataDir: t.TempDir()}}, c)
	if err != nil {
		t.Fatal(err)
	}
	a := h.agents["n1"]
	rt := a.tasks.add(context.Background(), workflows.RunTaskInput{JobID: "train-1", Attempt: 1, NodeID: "n1", GPUs: []int{0}})

	entered := c.entered
	batch := make(chan struct{})
	go func() { h.heartbeat(context.Background()); close(batch) }()
	<-entered // the batch has read train-1 as running
	rt.exited.Store(true)
	exitBeat := make(chan struct{})
	go func() { a.heartbeat(context.Background()); close(exitBeat) }()
	select {
	case <-exitBeat:
		t.Fatal("the exit beat went out while the batch that read the task running was still under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(c.release)
	<-batch
	<-exitBeat

	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.beatTasks); n != 2 || len(c.beatTasks[0]) != 1 || len(c.beatTasks[1]) != 0 {
		t.Fatalf("beats in order %v, want the batch with train-1 and then the exit beat without it", c.beatTasks)
	}
}
