package api

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// fakeJobs stands in for job workflows: a job is its spec, running until
// cancelled.
type fakeJobs struct {
	mu        sync.Mutex
	specs     map[gangway.JobID]gangway.JobSpec
	cancelled map[gangway.JobID]bool
	preempted []gangway.JobID
}

func newFakeJobs(specs ...gangway.JobSpec) *fakeJobs {
	f := &fakeJobs{specs: map[gangway.JobID]gangway.JobSpec{}, cancelled: map[gangway.JobID]bool{}}
	for _, s := range specs {
		f.specs[s.Name] = s
	}
	return f
}

func (f *fakeJobs) Start(_ context.Context, spec gangway.JobSpec, _ jobs.StartOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.specs[spec.Name]; ok {
		return fmt.Errorf("start job %s: %w", spec.Name, jobs.ErrJobExists)
	}
	f.specs[spec.Name] = spec
	return nil
}

func (f *fakeJobs) Describe(_ context.Context, id gangway.JobID) (jobs.Description, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.specs[id]
	if !ok {
		return jobs.Description{}, fmt.Errorf("describe job %s: %w", id, jobs.ErrJobGone)
	}
	return jobs.Description{Running: !f.cancelled[id], Team: s.Team}, nil
}

func (f *fakeJobs) status(id gangway.JobID) (workflows.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.specs[id]
	if !ok {
		return workflows.Status{}, jobs.ErrJobGone
	}
	st := workflows.Status{JobID: id, Team: s.Team, Phase: gangway.PhaseQueued, WaitTime: 90 * time.Second}
	if f.cancelled[id] {
		st.Phase = gangway.PhaseCancelled
	}
	return st, nil
}

func (f *fakeJobs) Query(_ context.Context, id gangway.JobID) (workflows.Status, error) {
	return f.status(id)
}

func (f *fakeJobs) Result(_ context.Context, id gangway.JobID) (workflows.Status, error) {
	return f.status(id)
}

func (f *fakeJobs) Cancel(_ context.Context, id gangway.JobID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled[id] = true
	return nil
}

func (f *fakeJobs) SignalPreempt(_ context.Context, id gangway.JobID, _ workflows.PreemptRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.preempted = append(f.preempted, id)
	return nil
}

func (f *fakeJobs) List(context.Context) ([]jobs.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []jobs.Summary
	for id, s := range f.specs {
		out = append(out, jobs.Summary{JobID: id, Team: s.Team, Phase: gangway.PhaseQueued})
	}
	slices.SortFunc(out, func(a, b jobs.Summary) int { return cmpString(a.JobID, b.JobID) })
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// fakeView stands in for the Redis view: one node, n1, with 8 GPUs, and
// the allocations given; and n9, lost, with none, until it is removed.
type fakeView struct {
	mu      sync.Mutex
	allocs  []gangway.Assignment
	offers  []gangway.Offer
	state   string
	logs    map[gangway.JobID][]gangway.LogLine
	removed bool
}

// lost is n9 as Nodes reports it, or nil once removed.
func (v *fakeView) lost() *gangway.NodeStatus {
	if v.removed {
		return nil
	}
	return &gangway.NodeStatus{Node: gangway.Node{ID: "n9", Pool: "onprem"}, State: gangway.NodeLost}
}

func (v *fakeView) RemoveNode(_ context.Context, nodeID string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case nodeID == "n1":
		return fmt.Errorf("remove node %s: %w", nodeID, capacity.ErrNodeBusy)
	case nodeID != "n9" || v.removed:
		return fmt.Errorf("remove node %s: %w", nodeID, capacity.ErrNotFound)
	}
	v.removed = true
	return nil
}

func (v *fakeView) node() gangway.Node {
	n := gangway.Node{ID: "n1", Pool: "onprem", CPUMilli: 64000, MemMiB: 1 << 20}
	for i := range 8 {
		n.GPUs = append(n.GPUs, gangway.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Model: "H100", Healthy: true})
	}
	return n
}

func (v *fakeView) FleetNodes(context.Context) ([]gangway.Node, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := []gangway.Node{v.node()}
	if l := v.lost(); l != nil {
		out = append(out, l.Node)
	}
	return out, nil
}

func (v *fakeView) CloudOffers(context.Context) ([]gangway.Offer, error) { return v.offers, nil }

func (v *fakeView) Nodes(context.Context) ([]gangway.NodeStatus, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := gangway.NodeStatus{Node: v.node(), State: v.state, Allocated: map[int]gangway.JobID{}}
	if st.State == "" {
		st.State = gangway.NodeReady
	}
	for _, a := range v.allocs {
		for _, m := range a.Members {
			for _, g := range m.GPUs {
				st.Allocated[g] = a.JobID
			}
		}
	}
	out := []gangway.NodeStatus{st}
	if l := v.lost(); l != nil {
		out = append(out, *l)
	}
	return out, nil
}

func (v *fakeView) SetNodeState(_ context.Context, nodeID, state string) error {
	if nodeID != "n1" {
		return fmt.Errorf("set node %s state: %w", nodeID, capacity.ErrNotFound)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.state = state
	return nil
}

func (v *fakeView) Allocations(context.Context) ([]gangway.Assignment, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.allocs), nil
}

func (v *fakeView) Waiting(context.Context, gangway.JobID) (gangway.Waiting, error) {
	return gangway.Waiting{}, nil
}

func (v *fakeView) Logs(_ context.Context, id gangway.JobID, after string, _ time.Duration) ([]gangway.LogLine, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []gangway.LogLine
	for _, l := range v.logs[id] {
		if after == "" || l.ID > after {
			out = append(out, l)
		}
	}
	return out, nil
}

// fakeLedger reports over fixed segments.
type fakeLedger struct{ segs []gangway.UsageSegment }

func (l fakeLedger) Report(_ context.Context, q accounting.Query) (gangway.CostSummary, error) {
	return accounting.Report(l.segs, q)
}
