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
	return each(ns, err, func(n capacity.NodeStatus) client.NodeInfo { return client.NodeInfo(n) })
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
	return each(lines, err, func(l capacity.LogLine) client.LogLine { return client.LogLine(l) })
}

// each converts what a view call returned to the client's type, element
// by element (the types share their fields, so conv is a conversion).
func each[T, U any](xs []T, err error, conv func(T) U) ([]U, error) {
	if err != nil {
		return nil, err
	}
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = conv(x)
	}
	return out, nil
}
