package web

import (
	"context"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/capacity"
)

// Source is what the pages read. Backend is the implementation over the
// running system; the unit tests use a fixed one.
type Source interface {
	// Fleet is the fleet at one instant: nodes, queue, allocations and
	// the view's clock, with the waiting reasons, the cloud offers and
	// the GPU health records beside them.
	Fleet(ctx context.Context) (Fleet, error)
	// Jobs lists the jobs, newest first.
	Jobs(ctx context.Context) ([]client.Summary, error)
	// Job is one job's status; an error wrapping client.ErrJobNotFound
	// when there is no such job.
	Job(ctx context.Context, id gangway.JobID) (client.JobStatus, error)
	// Usage is the usage report q asks for, from the ledger's recorded
	// runs and q.Running (accounting.Ledger.Report); only q.Running
	// without a ledger.
	Usage(ctx context.Context, q accounting.Query) (gangway.CostSummary, error)
	// Fragmentation is the fleet's fragmentation over time, oldest first.
	Fragmentation(ctx context.Context) ([]FragSample, error)
}

// Fleet is what the map, the queue and the team pages are drawn from.
type Fleet struct {
	capacity.Snapshot
	// Reasons are the last dispatch cycle's waiting records.
	Reasons map[gangway.JobID]gangway.Waiting
	// Offers are the cloud pools the servers offer.
	Offers []gangway.Offer
	// Health is each node's GPU health records (node → GPU index); a
	// fenced GPU's reason is there.
	Health map[string]map[int]gangway.GPUHealth
}

// FragSample is the fleet's fragmentation at one instant.
type FragSample struct {
	At time.Time `json:"at"`
	// Rate is the share of free GPU capacity the typical workload cannot
	// use (placement.Report.Rate; dispatch.Measure).
	Rate float64 `json:"rate"`
	// FreeGPUs are entirely free GPUs on schedulable nodes, LargestNode
	// the most of them free on one node.
	FreeGPUs    int `json:"freeGPUs"`
	LargestNode int `json:"largestNode"`
	// Pending is how many jobs were queued.
	Pending int `json:"pending"`
}
