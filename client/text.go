package client

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

// WriteText writes the status as `gangway status` shows it: phase, reason,
// while it waits why, when it should start, what it waits for and its
// cloud option, attempts, placement, time and cost so far, each run, and
// the phase history. Durations are rounded to 100 ms; the estimate is
// told relative to AsOf (now, when that is zero).
func (st JobStatus) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "Job:       %s (team %s)\n", st.JobID, st.Team)
	fmt.Fprintf(w, "Phase:     %s\n", st.Phase)
	if st.Reason != "" {
		fmt.Fprintf(w, "Reason:    %s\n", st.Reason)
	}
	if st.Waiting != nil {
		fmt.Fprintf(w, "Waiting:   %s\n", st.Waiting)
		writeEstimate(w, *st.Waiting, st.asOf(), "%-11s")
	}
	fmt.Fprintf(w, "Attempts:  %d (user retries %d, infrastructure restarts %d)\n", st.Attempt, st.UserRetries, st.InfraRestarts)
	if st.Assignment != nil {
		fmt.Fprintf(w, "Placement: %s\n", st.Assignment.Where())
	}
	soFar := ""
	if !st.AsOf.IsZero() && !st.Phase.Terminal() {
		soFar = " (so far)"
	}
	fmt.Fprintf(w, "Wait:      %s   Run: %s   GPU-seconds: %.0f   Cost: %s%s\n", round(st.WaitTime), round(st.RunTime),
		st.GPUSeconds, gangway.FormatDollars(st.Dollars), soFar)
	if st.LostGPUSeconds > 0 {
		fmt.Fprintf(w, "Lost:      %.0f GPU-seconds of work redone after restarts\n", st.LostGPUSeconds)
	}
	writeAttempts(w, st.Attempts, st.EarlierAttempts, st.AsOf)
	if len(st.Phases) > 0 {
		fmt.Fprintln(w, "History:")
		if st.EarlierPhases > 0 {
			fmt.Fprintf(w, "  (%d earlier phase changes not kept)\n", st.EarlierPhases)
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, p := range st.Phases {
			fmt.Fprintf(tw, "  %s\t%s\tattempt %d\t%s\n", p.At.Local().Format("15:04:05.000"), p.Phase, p.Attempt, p.Reason)
		}
		return tw.Flush()
	}
	return nil
}

// writeAttempts shows where each run went, how long it ran (the running
// one: so far, when asOf says as of when), how it ended and what it
// resumed from; runs the status no longer keeps one by one are summed on
// one line first.
func writeAttempts(w io.Writer, attempts []workflows.AttemptRecord, earlier *workflows.AttemptSummary, asOf time.Time) {
	if len(attempts) == 0 {
		return
	}
	fmt.Fprintln(w, "Runs:")
	if e := earlier; e != nil && e.Count > 0 {
		causes := slices.Sorted(maps.Keys(e.Ended))
		for i, c := range causes {
			causes[i] = fmt.Sprintf("%d %s", e.Ended[c], c)
		}
		fmt.Fprintf(w, "  #%d-%d (%d runs, not kept one by one): %s; %.0f GPU-seconds, %.0f lost, %s\n",
			e.First, e.Last, e.Count, strings.Join(causes, ", "), e.GPUSeconds, e.LostGPUSeconds, gangway.FormatDollars(e.Dollars))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  #	POOL	CAPACITY	NODES	RAN	ENDED	RESUMED FROM	LOST GPU-S	COST\n")
	for _, a := range attempts {
		ran, ended := "", a.Ended
		switch {
		case !a.EndedAt.IsZero():
			ran = round(a.EndedAt.Sub(a.StartedAt)).String()
		case !asOf.IsZero() && !a.StartedAt.IsZero():
			ran = round(max(asOf.Sub(a.StartedAt), 0)).String()
		}
		if ended == "" {
			ended = "running"
		}
		if a.By != "" {
			ended += " by " + a.By
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\n", a.Attempt, a.Pool, a.CapacityType,
			strings.Join(a.Nodes, ","), ran, ended, checkpointName(a.ResumedFrom), a.LostGPUSeconds, gangway.FormatDollars(a.Dollars))
	}
	tw.Flush()
}

func checkpointName(r *workflows.CheckpointRef) string {
	switch {
	case r == nil:
		return "-"
	case r.Step != nil:
		return fmt.Sprintf("step %d (%s)", *r.Step, r.ID)
	}
	return r.ID
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }

func (st JobStatus) asOf() time.Time {
	if st.AsOf.IsZero() {
		return time.Now()
	}
	return st.AsOf
}

// writeEstimate writes when a waiting job should start, the jobs it waits
// for and its cloud option, one line each, labels formatted by label.
func writeEstimate(w io.Writer, wt gangway.Waiting, now time.Time, label string) {
	line := func(name, format string, args ...any) {
		fmt.Fprintf(w, label+format+"\n", append([]any{name + ":"}, args...)...)
	}
	if e := wt.ETA; e != nil {
		at := func(t time.Time) string { return t.Local().Format(time.TimeOnly) }
		when := fmt.Sprintf("P50 %s, P90 %s", at(e.P50), at(e.P90))
		if e.P50.Sub(now) > 20*time.Hour || e.P90.Sub(now) > 20*time.Hour {
			when = fmt.Sprintf("P50 %s, P90 %s", e.P50.Local().Format(time.DateTime), e.P90.Local().Format(time.DateTime))
		}
		if e.NoneInSight() {
			when = "no P50 or P90"
		}
		line("ETA", "%s; %s (estimated %s ago)", e.String(now), when, max(now.Sub(e.At), 0).Round(time.Second))
	}
	if len(wt.WaitsFor) > 0 {
		line("Waits for", "%s", strings.Join(wt.WaitsFor, ", "))
	}
	if c := wt.Cloud; c != nil {
		line("Cloud", "%s", c)
	}
}

// WriteWhy writes the status as `gangway why` shows it: the phase and,
// while the job waits, the dispatch loop's reason, when it should start,
// the jobs it waits for, its cloud option, its own reservation, and
// whether waiting helps at all; where a placed job runs, or how a finished
// one ended.
func (st JobStatus) WriteWhy(w io.Writer, now time.Time) error {
	since := ""
	if n := len(st.Phases); n > 0 {
		since = fmt.Sprintf(" since %s", st.Phases[n-1].At.Local().Format(time.DateTime))
	}
	fmt.Fprintf(w, "Job %s (team %s) is %s%s, attempt %d.\n", st.JobID, st.Team, st.Phase, since, st.Attempt)
	switch {
	case st.Phase == gangway.PhaseProvisioning:
		fmt.Fprintf(w, "Why: launching cloud instances for it: %s\n", st.Reason)
	case st.Phase == gangway.PhaseQueued || st.Phase == gangway.PhaseRequeued || st.Phase == gangway.PhaseSubmitted:
		if st.Waiting == nil && len(st.Unavailable) > 0 {
			fmt.Fprintln(w, "Why: not known now: the fleet view is unreachable")
			break
		}
		if st.Waiting == nil {
			fmt.Fprintln(w, "Why: not yet considered by the dispatch loop (it runs every cycle; is a gangway server up?)")
			break
		}
		wt := *st.Waiting
		fmt.Fprintf(w, "Why: %s\n", wt)
		writeEstimate(w, wt, now, "%s ")
		if !wt.ReservationStart.IsZero() {
			// The reservation counts on the jobs holding those GPUs
			// running to their max runtimes; the estimate, on how long
			// they are expected to run. Two times, both true.
			sooner := ""
			if wt.ETA != nil && wt.ETA.P50.Before(wt.ReservationStart) {
				sooner = "; held from then at the latest: the jobs on them are expected to end sooner (ETA)"
			}
			fmt.Fprintf(w, "Reserved: GPUs on %s from %s (in %s)%s\n", strings.Join(wt.ReservedNodes, ","),
				wt.ReservationStart.Local().Format(time.DateTime), max(wt.ReservationStart.Sub(now), 0).Round(time.Second), sooner)
		}
		switch {
		case wt.CloudOnly():
			fmt.Fprintln(w, "It will not fit on-prem as the fleet stands: it can start only in the cloud (above).")
		case wt.Reason != "" && !wt.Retry:
			fmt.Fprintln(w, "It will not fit as the fleet stands: change the job's spec or add capacity.")
		}
	case st.Assignment != nil && !st.Phase.Terminal():
		fmt.Fprintf(w, "Where: %s\n", st.Assignment.Where())
	default:
		fmt.Fprintf(w, "Reason: %s\n", st.Reason)
	}
	return nil
}
