package web

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/dispatch"
)

// Backend is the Source over the running system: jobs through the Go
// client (job workflows), the fleet through the capacity view, usage
// through the ledger, and fragmentation from the samples Sample takes.
type Backend struct {
	Client *client.Client
	View   *capacity.View
	// Ledger is the usage ledger (nil: none; the team pages then count
	// only the runs in flight).
	Ledger accounting.SegmentSource
	// NodeTTL is the dispatch loop's: a node silent longer is not
	// schedulable, so its free GPUs are not counted free.
	NodeTTL time.Duration
	// Frag holds the samples; NewBackend makes one.
	Frag *FragRing
	Log  *slog.Logger
}

// FragHistory is how many fragmentation samples NewBackend's ring keeps:
// two hours at FragEvery.
const (
	FragEvery   = 10 * time.Second
	FragHistory = 720
)

// NewBackend returns a backend with a ring of FragHistory samples.
func NewBackend(c *client.Client, v *capacity.View, ledger accounting.SegmentSource, nodeTTL time.Duration, log *slog.Logger) *Backend {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if nodeTTL <= 0 {
		nodeTTL = dispatch.DefaultNodeTTL
	}
	return &Backend{Client: c, View: v, Ledger: ledger, NodeTTL: nodeTTL, Frag: NewFragRing(FragHistory), Log: log}
}

var _ Source = (*Backend)(nil)

// Fleet reads the snapshot, the reasons, the offers and the GPU health.
func (b *Backend) Fleet(ctx context.Context) (Fleet, error) {
	snap, err := b.View.Snapshot(ctx)
	if err != nil {
		return Fleet{}, err
	}
	f := Fleet{Snapshot: snap}
	if f.Reasons, err = b.View.Reasons(ctx); err != nil {
		return Fleet{}, err
	}
	if f.Offers, err = b.View.CloudOffers(ctx); err != nil {
		return Fleet{}, err
	}
	if f.Health, err = b.View.AllGPUHealth(ctx); err != nil {
		return Fleet{}, err
	}
	return f, nil
}

// Jobs lists the jobs Temporal's visibility store knows.
func (b *Backend) Jobs(ctx context.Context) ([]client.Summary, error) { return b.Client.List(ctx) }

// Job is the job's live status, or its result once it ended.
func (b *Backend) Job(ctx context.Context, id gangway.JobID) (client.JobStatus, error) {
	return b.Client.Status(ctx, id)
}

// Usage reports from the ledger's segments in q's window plus q.Running,
// less the running runs the ledger already holds (ended, their allocation
// not yet released), as accounting.Ledger.Report does.
func (b *Backend) Usage(ctx context.Context, q accounting.Query) (gangway.CostSummary, error) {
	var segs []gangway.UsageSegment
	if b.Ledger != nil {
		var err error
		if segs, err = b.Ledger.Segments(ctx, q.Since, q.Until); err != nil {
			return gangway.CostSummary{}, fmt.Errorf("usage ledger: %w", err)
		}
	}
	type run struct {
		job     gangway.JobID
		attempt int
	}
	recorded := map[run]bool{}
	for _, s := range segs {
		recorded[run{s.JobID, s.Attempt}] = true
	}
	q.Running = slices.DeleteFunc(slices.Clone(q.Running), func(s gangway.UsageSegment) bool {
		return recorded[run{s.JobID, s.Attempt}]
	})
	return accounting.Report(segs, q)
}

// Fragmentation returns the samples taken so far.
func (b *Backend) Fragmentation(context.Context) ([]FragSample, error) { return b.Frag.Samples(), nil }

// SampleOnce measures the fleet's fragmentation now, as the dispatch loop
// does, into the ring.
func (b *Backend) SampleOnce(ctx context.Context) error {
	snap, err := b.View.Snapshot(ctx)
	if err != nil {
		return err
	}
	typical, err := b.View.TypicalWorkload(ctx)
	if err != nil {
		return err
	}
	r := dispatch.Measure(snap, typical, b.NodeTTL)
	b.Frag.Add(FragSample{At: snap.Now, Rate: r.Rate, FreeGPUs: r.FreeGPUs,
		LargestNode: r.Largest[string(gangway.LevelNode)], Pending: len(snap.Queue)})
	return nil
}

// Sample takes a sample at once and then every interval (FragEvery when
// not positive) until ctx ends. A failed sample is logged and skipped: the
// chart shows a gap, not a made-up value.
func (b *Backend) Sample(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = FragEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := b.SampleOnce(ctx); err != nil && ctx.Err() == nil {
			b.Log.Warn("web view: fragmentation sample failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
