package clientview

import (
	"context"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/capacity"
)

// View is a client.View over a capacity view.
type View struct{ v *capacity.View }

var _ client.View = View{}

// New returns the adapter over v.
func New(v *capacity.View) View { return View{v: v} }

// FleetNodes implements client.View.
func (a View) FleetNodes(ctx context.Context) ([]gangway.Node, error) { return a.v.FleetNodes(ctx) }

// Nodes implements client.View.
func (a View) Nodes(ctx context.Context) ([]client.NodeInfo, error) {
	ns, err := a.v.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]client.NodeInfo, len(ns))
	for i, n := range ns {
		out[i] = client.NodeInfo(n)
	}
	return out, nil
}

// SetNodeState implements client.View.
func (a View) SetNodeState(ctx context.Context, nodeID, state string) error {
	return a.v.SetNodeState(ctx, nodeID, state)
}

// Allocations implements client.View.
func (a View) Allocations(ctx context.Context) ([]gangway.Assignment, error) {
	return a.v.Allocations(ctx)
}

// Waiting implements client.View.
func (a View) Waiting(ctx context.Context, id gangway.JobID) (client.Waiting, error) {
	w, err := a.v.Reason(ctx, id)
	return client.Waiting(w), err
}

// Logs implements client.View.
func (a View) Logs(ctx context.Context, id gangway.JobID, after string, block time.Duration) ([]client.LogLine, error) {
	lines, err := a.v.Logs(ctx, id, after, block)
	if err != nil {
		return nil, err
	}
	out := make([]client.LogLine, len(lines))
	for i, l := range lines {
		out[i] = client.LogLine(l)
	}
	return out, nil
}
