package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows"
)

// The Redis view is rebuildable: when it is lost or replaced (a FLUSHALL,
// a Redis restarted empty, one that went back in time to a moment before
// writes its readers saw) its generation changes and the snapshot says it
// is not rebuilt (capacity/rebuild.go). Until the leader has rebuilt it,
// the loop places nothing, since a GPU's owner may be unknown. The rebuild
// waits until every live agent has heartbeat once into the new generation
// (a node TTL from its start: the heartbeats carry the tasks each node
// runs, whose GPUs the view then shows held), asks every open job workflow
// what it holds (Holdings): a waiting one is queued again with its entry,
// and the assignment of a running one is restored as its allocation; and
// the cordons come back from the durable store (NodeStates). Then the view
// is marked rebuilt and placing resumes.

// Holdings is where the rebuild learns what each open job workflow holds
// in the view (jobs.Jobs.Holdings): the states of those that answered and
// the IDs of those that did not.
type Holdings interface {
	Holdings(ctx context.Context) ([]workflows.ViewState, []gangway.JobID, error)
}

// NodeStates is the durable record of the nodes' admin state (the ledger
// database): node → gangway.NodeCordoned.
type NodeStates interface {
	NodeStates(ctx context.Context) (map[string]string, error)
}

// rebuilder is the part of the Redis view a rebuild writes to.
type rebuilder interface {
	Enqueue(ctx context.Context, e gangway.QueueEntry) (bool, error)
	Restore(ctx context.Context, holder string, snap capacity.Snapshot, held []capacity.Held, states map[string]string) (int, []string, error)
	MarkRebuilt(ctx context.Context, holder, gen string) error
}

// generationCommitter commits a plan fenced by the view's generation
// (capacity.View.CommitIn).
type generationCommitter interface {
	CommitIn(ctx context.Context, holder, gen string, plan []gangway.Assignment) error
}

// rebuildPatience is how long a rebuild waits for job workflows that do not
// answer (their worker may be restarting) before it goes on without them;
// their tasks' GPUs stay held as their agents report them.
const rebuildPatience = 30 * time.Second

// rebuildView rebuilds snap's view, which is not rebuilt, as far as it can
// this turn: true once it is (snapshot again and place), false to place
// nothing this turn.
func (l *Loop) rebuildView(ctx context.Context, snap capacity.Snapshot) bool {
	rb, ok := l.cap.(rebuilder)
	if !ok {
		// Only the Redis view loses itself; a capacity that cannot be
		// rebuilt says its snapshots are.
		l.log.Error("the view says it is not rebuilt but cannot be rebuilt")
		return false
	}
	gen := snap.Generation
	if gen != l.rebuild.gen {
		// Whatever was pending belongs to the view that was lost: its
		// allocations are rebuilt from the workflows, not re-signalled.
		l.rebuild.gen, l.rebuild.began = gen, l.cfg.Clock.Now()
		clear(l.unsignaled)
		clear(l.bursts)
		clear(l.preempted)
		l.log.Warn("the view is new, or was lost, replaced or went back in time: rebuilding it before placing anything", "generation", gen)
	}
	var held []capacity.Held
	queued := 0
	if l.cfg.Holdings != nil {
		states, missing, err := l.cfg.Holdings.Holdings(ctx)
		if err != nil {
			l.log.Warn("rebuild: cannot list the job workflows", "error", err)
			return false
		}
		// With no job open no task runs; otherwise every live agent must
		// have reported its tasks into this generation first.
		start := capacity.GenerationStart(gen)
		if len(states)+len(missing) > 0 && snap.Now.Sub(start) < l.cfg.NodeTTL {
			return false
		}
		if len(missing) > 0 {
			if l.cfg.Clock.Now().Sub(l.rebuild.began) < rebuildPatience {
				l.log.Warn("rebuild: job workflows did not answer; asking again", "jobs", len(missing))
				return false
			}
			l.log.Warn("rebuild: going on without job workflows that did not answer; the agents' reports hold their GPUs",
				"jobs", missing)
		}
		for _, s := range states {
			switch {
			case s.Holding != nil:
				h := capacity.Held{Assignment: *s.Holding}
				if s.Entry != nil {
					h.CPUMilli, h.MemMiB = s.Entry.CPUMilli, s.Entry.MemMiB
				}
				held = append(held, h)
			case s.Queued && s.Entry != nil:
				if _, err := rb.Enqueue(ctx, *s.Entry); err != nil {
					l.log.Warn("rebuild: cannot queue a job again", "job_id", s.JobID, "error", err)
					return false
				}
				queued++
			}
		}
	}
	var states map[string]string
	if l.cfg.NodeStates != nil {
		var err error
		if states, err = l.cfg.NodeStates.NodeStates(ctx); err != nil {
			l.log.Warn("rebuild: cannot read the nodes' durable state", "error", err)
			return false
		}
	}
	restored, refused, err := rb.Restore(ctx, l.cfg.Holder, snap, held, states)
	if err == nil {
		err = rb.MarkRebuilt(ctx, l.cfg.Holder, gen)
	}
	switch {
	case errors.Is(err, capacity.ErrNotLeader):
		l.setLeading(false)
		return false
	case err != nil:
		l.log.Warn("rebuild failed; trying again", "error", err)
		return false
	}
	if len(refused) > 0 {
		l.log.Error("rebuild: assignments refused, their GPUs held by other jobs", "refused", refused)
	}
	l.log.Info("view rebuilt", "generation", gen, "queued", queued, "allocations", restored, "cordons", len(states),
		"took", l.cfg.Clock.Now().Sub(l.rebuild.began))
	if l.cfg.Metrics != nil {
		l.cfg.Metrics.ViewRebuilt()
	}
	return true
}

// commit commits the plan made from snap, fenced by its generation where
// the view can.
func (l *Loop) commit(ctx context.Context, snap capacity.Snapshot, plan []gangway.Assignment) error {
	if c, ok := l.cap.(generationCommitter); ok {
		return c.CommitIn(ctx, l.cfg.Holder, snap.Generation, plan)
	}
	return l.cap.Commit(ctx, l.cfg.Holder, plan)
}
