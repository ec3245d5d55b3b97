package server

import (
	"context"
	"fmt"
	"slices"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/dispatch"
)

// nodeQueues finds the task queue a node's registration names.
type nodeQueues interface {
	NodeTaskQueues(ctx context.Context, ids []string) (map[string]string, error)
}

// routed fills in, before an assignment is signalled, the task queue of
// each member whose node names one (the simulated nodes an agent host
// runs, internal/agent.Host); members of nodes on their own queue are left
// as placement made them. Placement decides where GPUs are, not how tasks
// reach them, so the routing is added at the door to the workflows. A
// re-signal (a new leader, a retry) looks the queues up again.
type routed struct {
	dispatch.Workflows
	nodes nodeQueues
}

func (r routed) SignalPlaced(ctx context.Context, a gangway.Assignment) error {
	ids := make([]string, 0, len(a.Members))
	for _, m := range a.Members {
		if m.TaskQueue == "" {
			ids = append(ids, m.NodeID)
		}
	}
	queues, err := r.nodes.NodeTaskQueues(ctx, ids)
	if err != nil {
		return fmt.Errorf("route %s: %w", a.JobID, err)
	}
	if len(queues) > 0 {
		a.Members = slices.Clone(a.Members)
		for i, m := range a.Members {
			if q, ok := queues[m.NodeID]; ok && m.TaskQueue == "" {
				a.Members[i].TaskQueue = q
			}
		}
	}
	return r.Workflows.SignalPlaced(ctx, a)
}
