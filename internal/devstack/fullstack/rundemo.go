package fullstack

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
)

// DemoClient is what RunDemo needs of a *client.Client.
type DemoClient interface {
	Submit(ctx context.Context, spec gangway.JobSpec, o client.SubmitOptions) (gangway.JobID, error)
	Status(ctx context.Context, id gangway.JobID) (client.JobStatus, error)
}

// Demo is one run of the demo workload (DemoSpecs) and what it reports
// while it follows the jobs. Every On func may be nil.
type Demo struct {
	Client DemoClient
	// Specs are the jobs to submit, in order.
	Specs []gangway.JobSpec
	// GPUUse counts busy and all GPUs and the cloud nodes (GPUUse on the
	// stack's view); nil reports zeros.
	GPUUse func(ctx context.Context) (busy, total, cloudNodes int)
	// Events are the stack's own events (Stack.Events), passed on to
	// OnEvent as they come.
	Events <-chan string
	// Poll is the time between status rounds (default 1s).
	Poll time.Duration

	// OnSubmitted is called once every job is submitted.
	OnSubmitted func(ids []gangway.JobID)
	// OnEvent is called with each stack event, elapsed since submission.
	OnEvent func(elapsed time.Duration, event string)
	// OnWaiting is called when the waiting reason of a gang or an 8-GPU
	// job changes kind (small jobs start too soon to be worth telling).
	OnWaiting func(id gangway.JobID, w gangway.Waiting)
	// OnProgress is called when the counts change.
	OnProgress func(elapsed time.Duration, p DemoProgress)
}

// DemoProgress counts the demo's jobs by phase group and the fleet's use.
type DemoProgress struct {
	Queued, Provisioning, Running, Succeeded, Failed, Cancelled int
	BusyGPUs, TotalGPUs, CloudNodes                             int
}

// DemoResult is how the demo ended: the last status of every job.
type DemoResult struct {
	IDs      []gangway.JobID
	Statuses map[gangway.JobID]client.JobStatus
	Elapsed  time.Duration
}

// PrintTo sets every On func to print a line to w, as `gangway dev` shows
// the demo.
func (d *Demo) PrintTo(w io.Writer) {
	d.OnSubmitted = func(ids []gangway.JobID) { fmt.Fprintf(w, "gangway dev: submitted %d demo jobs\n\n", len(ids)) }
	d.OnEvent = func(e time.Duration, event string) { fmt.Fprintf(w, "[%5.1fs] %s\n", e.Seconds(), event) }
	d.OnWaiting = func(id gangway.JobID, wt gangway.Waiting) { fmt.Fprintf(w, "          %s waits: %s\n", id, wt) }
	d.OnProgress = func(e time.Duration, p DemoProgress) {
		fmt.Fprintf(w, "[%5.1fs] queued %2d  provisioning %d  running %2d  succeeded %2d  failed %d  cancelled %d | GPUs busy %2d/%d | cloud nodes %d\n",
			e.Seconds(), p.Queued, p.Provisioning, p.Running, p.Succeeded, p.Failed, p.Cancelled, p.BusyGPUs, p.TotalGPUs, p.CloudNodes)
	}
}

// WriteSummary writes how long the demo took and one line per job (team,
// gang shape, phase, wait, run, GPU-seconds, cost, attempts, pool, nodes),
// and reports whether every job succeeded.
func (r DemoResult) WriteSummary(w io.Writer) bool {
	fmt.Fprintf(w, "\nAll %d demo jobs finished in %s.\n\n", len(r.IDs), r.Elapsed.Round(100*time.Millisecond))
	ids := slices.Sorted(slices.Values(r.IDs))
	ok := true
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tTEAM\tGANG\tPHASE\tWAIT\tRUN\tGPU-S\tCOST\tATTEMPTS\tPOOL\tNODES")
	for _, id := range ids {
		st := r.Statuses[id]
		gang, nodes, pool := "", "", ""
		if a := st.Assignment; a != nil && len(a.Members) > 0 {
			ns := make([]string, len(a.Members))
			for i, m := range a.Members {
				ns[i] = m.NodeID
			}
			nodes = strings.Join(ns, ",")
			gang = fmt.Sprintf("%dx%d", len(a.Members), len(a.Members[0].GPUs))
			pool = a.Members[0].Pool
		}
		if n := len(st.Attempts); n > 0 && st.Attempts[n-1].Pool != "" {
			pool = st.Attempts[n-1].Pool
		}
		ok = ok && st.Phase == gangway.PhaseSucceeded
		round := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t$%.4f\t%d\t%s\t%s\n", id, st.Team, gang, st.Phase,
			round(st.WaitTime), round(st.RunTime), st.GPUSeconds, st.Dollars, st.Attempt, pool, nodes)
	}
	_ = tw.Flush()
	return ok
}

// Run submits the specs and follows the jobs until every one has ended or
// ctx does.
func (d Demo) Run(ctx context.Context) (DemoResult, error) {
	poll := d.Poll
	if poll <= 0 {
		poll = time.Second
	}
	res := DemoResult{Statuses: map[gangway.JobID]client.JobStatus{}}
	wholeNode := map[gangway.JobID]bool{} // gangs and 8-GPU jobs: their waits are worth telling
	for _, s := range d.Specs {
		id, err := d.Client.Submit(ctx, s, client.SubmitOptions{})
		if err != nil {
			return res, fmt.Errorf("submit demo job %s: %w", s.Name, err)
		}
		res.IDs = append(res.IDs, id)
		wholeNode[id] = s.Gang.Replicas > 1 || s.Gang.GPUsPerReplica >= 8
	}
	if d.OnSubmitted != nil {
		d.OnSubmitted(res.IDs)
	}
	start := time.Now()
	told := map[gangway.JobID]string{} // the waiting reason last reported per gang
	var last *DemoProgress
	for {
		done := 0
		for _, id := range res.IDs {
			if st, ok := res.Statuses[id]; ok && st.Phase.Terminal() {
				done++
				continue
			}
			st, err := d.Client.Status(ctx, id)
			if err != nil {
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				continue
			}
			res.Statuses[id] = st
			// Report why each gang waits, once per kind of reason.
			if w := st.Waiting; w != nil && w.Reason != "" && told[id] != w.Reason && wholeNode[id] {
				if d.OnWaiting != nil {
					d.OnWaiting(id, *w)
				}
				told[id] = w.Reason
			}
			if st.Phase.Terminal() {
				done++
			}
		}
	drain:
		for {
			select {
			case e := <-d.Events:
				if d.OnEvent != nil {
					d.OnEvent(time.Since(start), e)
				}
			default:
				break drain
			}
		}
		p := countDemo(res.Statuses)
		if d.GPUUse != nil {
			p.BusyGPUs, p.TotalGPUs, p.CloudNodes = d.GPUUse(ctx)
		}
		if last == nil || p != *last {
			if d.OnProgress != nil {
				d.OnProgress(time.Since(start), p)
			}
			last = &p
		}
		if done == len(res.IDs) {
			res.Elapsed = time.Since(start)
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// countDemo counts jobs by phase group: submitted and requeued jobs are
// queued, placed ones running.
func countDemo(statuses map[gangway.JobID]client.JobStatus) DemoProgress {
	var p DemoProgress
	for _, st := range statuses {
		switch st.Phase {
		case gangway.PhaseQueued, gangway.PhaseRequeued, gangway.PhaseSubmitted:
			p.Queued++
		case gangway.PhaseProvisioning:
			p.Provisioning++
		case gangway.PhaseRunning, gangway.PhasePlaced:
			p.Running++
		case gangway.PhaseSucceeded:
			p.Succeeded++
		case gangway.PhaseFailed:
			p.Failed++
		case gangway.PhaseCancelled:
			p.Cancelled++
		}
	}
	return p
}
