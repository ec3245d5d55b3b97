package fullstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/nodeauth"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/fake"
)

// FakeAgents runs an in-process agent for every running instance of a
// fake cloud: what the boot script does on a real instance. A booted
// instance's agent registers a node owned by the instance's job, in its
// pool and capacity type; a preemption notice reaches the agent as a
// real cloud's metadata service would deliver it; a terminated instance's
// agent stops (killing its tasks, as the instance's end would) and its
// node leaves the view.
type FakeAgents struct {
	view     *capacity.View
	temporal client.Client
	// base is every agent's config; Node, DataDir (under base.DataDir)
	// and Notices are set per instance.
	base agent.Config
	log  *slog.Logger
	// events, when set, receives a line per boot, notice and termination;
	// a full channel drops lines.
	events chan<- string
	// Auth, when set, gives each instance's agent the node token it signs
	// its task-done records with (agent.DirectView).
	Auth *nodeauth.Authority

	mu     sync.Mutex
	closed bool
	agents map[string]*fakeAgent // by instance ID
	wg     sync.WaitGroup
}

type fakeAgent struct {
	cancel  context.CancelFunc
	done    chan struct{}
	notices chan agent.Notice
}

// NewFakeAgents returns the agents of fake cloud instances: base is every
// agent's config (Node, DataDir under base.DataDir, and Notices are set per
// instance). events, if not nil, receives a line per boot, notice and
// termination; a full channel drops lines.
func NewFakeAgents(view *capacity.View, tc client.Client, base agent.Config, log *slog.Logger, events chan<- string) *FakeAgents {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FakeAgents{view: view, temporal: tc, base: base, log: log, events: events, agents: map[string]*fakeAgent{}}
}

// Hooks are the callbacks to give every fake cloud.
func (f *FakeAgents) Hooks() FakeHooks {
	return FakeHooks{OnRunning: f.running, OnNotice: f.notice, OnTerminated: f.terminated}
}

func (f *FakeAgents) event(format string, args ...any) {
	if f.events == nil {
		return
	}
	select {
	case f.events <- fmt.Sprintf(format, args...):
	default:
	}
}

// running starts the instance's agent.
func (f *FakeAgents) running(in providers.Instance) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.agents[in.ID] != nil {
		return
	}
	node := agent.FakeNode(in.NodeID, in.Pool, "127.0.0.1", in.GPUs, in.GPUModel)
	node.Owner = gangway.JobID(in.Tags[providers.TagJob])
	node.CapacityType = in.CapacityType
	cfg := f.base
	cfg.Node = node
	cfg.DataDir = filepath.Join(f.base.DataDir, in.NodeID)
	notices := make(chan agent.Notice, 4)
	cfg.Notices = notices
	ctx, cancel := context.WithCancel(context.Background())
	a := &fakeAgent{cancel: cancel, done: make(chan struct{}), notices: notices}
	f.agents[in.ID] = a
	ag := agent.New(cfg, agent.DirectView{View: f.view, Token: f.Auth.NodeToken(node.ID, node.Pool)})
	f.wg.Go(func() {
		defer close(a.done)
		if err := ag.Run(ctx, f.temporal); err != nil && ctx.Err() == nil {
			f.log.Error("cloud agent stopped", "node", in.NodeID, "error", err)
		}
	})
	f.log.Info("cloud instance up; agent started", "instance", in.ID, "pool", in.Pool, "job_id", node.Owner)
	f.event("cloud: %s up in %s (%d×%s, %s) for %s", in.ID, in.Pool, in.GPUs, in.GPUModel, in.CapacityType, node.Owner)
}

// notice hands a preemption notice to the instance's agent.
func (f *FakeAgents) notice(n fake.Notice) {
	f.mu.Lock()
	a := f.agents[n.InstanceID]
	f.mu.Unlock()
	f.event("cloud: %s in %s gets a preemption notice; reclaimed at %s", n.InstanceID, n.Pool, n.TerminateAt.Format(time.TimeOnly))
	if a == nil {
		return
	}
	select {
	case a.notices <- agent.Notice{Kind: agent.NoticeInterruption, Deadline: n.TerminateAt, Source: "fake",
		Detail: fmt.Sprintf("spot capacity in %s reclaimed", n.Pool)}:
	default:
		f.log.Warn("cloud agent's notice queue is full; notice dropped", "instance", n.InstanceID)
	}
}

// terminated stops the instance's agent and removes its node. It returns
// at once; the agent stops in the background.
func (f *FakeAgents) terminated(in providers.Instance) {
	f.event("cloud: %s in %s terminated (%s)", in.ID, in.Pool, in.StateReason)
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.agents[in.ID]
	delete(f.agents, in.ID)
	if a == nil || f.closed {
		return
	}
	a.cancel()
	// Added under the lock, so Close cannot be waiting already.
	f.wg.Go(func() {
		<-a.done
		// The node goes with its instance. A job still holding its GPUs
		// releases them when its task fails; the reconciler removes the
		// node then.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := f.view.RemoveNode(ctx, in.NodeID)
		switch {
		case err == nil, errors.Is(err, capacity.ErrNotFound):
		case errors.Is(err, capacity.ErrNodeBusy):
			if err := f.view.SetNodeState(ctx, in.NodeID, gangway.NodeLost); err != nil && !errors.Is(err, capacity.ErrNotFound) {
				f.log.Warn("mark node of terminated instance lost", "node", in.NodeID, "error", err)
			}
		default:
			f.log.Warn("remove node of terminated instance", "node", in.NodeID, "error", err)
		}
	})
}

// Close stops every agent and waits for them.
func (f *FakeAgents) Close() {
	f.mu.Lock()
	f.closed = true
	for _, a := range f.agents {
		a.cancel()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
