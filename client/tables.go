package client

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gangwayhq/gangway"
)

// WriteNodes writes the nodes as `gangway nodes` shows them: a row per
// node (pool, model, GPUs free and fenced, state, heartbeat age or
// "none" when none is on record, jobs),
// then GPU by GPU the ones fenced, flaky or with a fault on record (every
// GPU with allGPUs), with the job on each and its last fault.
func WriteNodes(w io.Writer, nodes []Node, allGPUs bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPOOL\tMODEL\tGPUS\tFREE\tFENCED\tSTATE\tHEARTBEAT\tJOBS")
	for _, n := range nodes {
		beat := "none"
		if !n.LastHeartbeat.IsZero() {
			beat = n.HeartbeatAge.Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", n.Node.ID, n.Node.Pool, n.Node.Model(),
			len(n.Node.GPUs), len(n.FreeGPUs()), fencedGPUs(n), n.State, beat, strings.Join(n.Jobs(), ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeGPUHealth(w, nodes, allGPUs, now)
}

// ListedJob is a row of `gangway list`: the job and, while it is queued,
// its waiting record (nil when there is none).
type ListedJob struct {
	Summary
	Waiting *gangway.Waiting `json:"waiting,omitempty"`
}

// ListWaiting is List with each queued job's waiting record. A record that
// cannot be read is left out rather than failing the list: it is a hint.
func (c *Client) ListWaiting(ctx context.Context) ([]ListedJob, error) {
	jobs, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]ListedJob, len(jobs))
	for i, j := range jobs {
		rows[i].Summary = j
		if j.ClosedAt.IsZero() && (j.Phase == gangway.PhaseQueued || j.Phase == gangway.PhaseRequeued) {
			rows[i].Waiting, _ = c.Waiting(ctx, j.JobID)
		}
	}
	return rows, nil
}

// WriteJobs writes the jobs as `gangway list` shows them, with when each
// waiting job should start, relative to now.
func WriteJobs(w io.Writer, jobs []ListedJob, now time.Time) error {
	if len(jobs) == 0 {
		// An empty table reads as a broken command.
		_, err := fmt.Fprintln(w, "no jobs (a user sees its own teams' jobs only)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tTEAM\tGPUS\tPHASE\tSUBMITTED\tETA")
	for _, r := range jobs {
		eta := "-"
		if wt := r.Waiting; wt != nil && wt.ETA != nil {
			eta = wt.ETA.String(now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.JobID, r.Team, r.GPUs, r.Phase, r.StartedAt.Local().Format(time.DateTime), eta)
	}
	return tw.Flush()
}

// fencedGPUs counts a node's GPUs out of service.
func fencedGPUs(n Node) int {
	k := 0
	for _, g := range n.Node.GPUs {
		if !g.Healthy {
			k++
		}
	}
	return k
}

// writeGPUHealth lists GPU by GPU the ones that are fenced, flaky or have
// faulted (every GPU with all), with the job on each and its last fault.
func writeGPUHealth(w io.Writer, nodes []Node, all bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := false
	for _, n := range nodes {
		for _, g := range n.Node.GPUs {
			h, known := n.GPUHealth[g.Index]
			if !all && g.Healthy && g.Flakiness == 0 && (!known || h.LastFault == nil) {
				continue
			}
			if !header {
				fmt.Fprintln(tw, "\nGPU\tUUID\tHEALTH\tFLAKINESS\tJOB\tLAST FAULT")
				header = true
			}
			state := "healthy"
			if !g.Healthy {
				state = "fenced"
				if known && !h.FencedAt.IsZero() {
					state += " " + ago(now, h.FencedAt)
				}
			}
			job := n.Allocated[g.Index]
			if job == "" {
				job = "-"
			}
			fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%.2f\t%s\t%s\n", n.Node.ID, g.Index, g.UUID, state, g.Flakiness, job, lastFault(h, now))
		}
	}
	return tw.Flush()
}

// lastFault is a GPU's last fault in words: "Xid 79 (GPU has fallen off
// the bus) 2m ago, blamed the GPU; jobs train".
func lastFault(h gangway.GPUHealth, now time.Time) string {
	f := h.LastFault
	if f == nil {
		return "-"
	}
	what := f.Kind
	if f.Xid > 0 {
		what = fmt.Sprintf("Xid %d", f.Xid)
	}
	s := fmt.Sprintf("%s (%s) %s", what, f.Meaning, ago(now, f.At))
	switch f.Blame {
	case "gpu":
		s += ", blamed the GPU"
	case "app":
		s += ", blamed the application"
	}
	if len(f.Jobs) > 0 {
		s += "; jobs " + strings.Join(slices.Clone(f.Jobs), ",")
	}
	return s
}

func ago(now, t time.Time) string { return now.Sub(t).Round(time.Second).String() + " ago" }
