package client

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gangwayhq/gangway/workflows"
)

// WriteText writes the status as `gangway status` shows it: phase, reason,
// attempts, placement, time and cost so far, each run, and the phase
// history. Durations are rounded to 100 ms.
func (st JobStatus) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "Job:       %s (team %s)\n", st.JobID, st.Team)
	fmt.Fprintf(w, "Phase:     %s\n", st.Phase)
	if st.Reason != "" {
		fmt.Fprintf(w, "Reason:    %s\n", st.Reason)
	}
	if st.Waiting != nil {
		fmt.Fprintf(w, "Waiting:   %s\n", st.Waiting)
	}
	fmt.Fprintf(w, "Attempts:  %d (user retries %d, infrastructure restarts %d)\n", st.Attempt, st.UserRetries, st.InfraRestarts)
	if st.Assignment != nil {
		fmt.Fprintf(w, "Placement: %s\n", st.Assignment.Where())
	}
	fmt.Fprintf(w, "Wait:      %s   Run: %s   GPU-seconds: %.0f   Cost: $%.2f\n", round(st.WaitTime), round(st.RunTime), st.GPUSeconds, st.Dollars)
	if st.LostGPUSeconds > 0 {
		fmt.Fprintf(w, "Lost:      %.0f GPU-seconds of work redone after restarts\n", st.LostGPUSeconds)
	}
	writeAttempts(w, st.Attempts, st.EarlierAttempts)
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

// writeAttempts shows where each run went, how it ended and what it
// resumed from; runs the status no longer keeps one by one are summed on
// one line first.
func writeAttempts(w io.Writer, attempts []workflows.AttemptRecord, earlier *workflows.AttemptSummary) {
	if len(attempts) == 0 {
		return
	}
	fmt.Fprintln(w, "Runs:")
	if e := earlier; e != nil && e.Count > 0 {
		causes := slices.Sorted(maps.Keys(e.Ended))
		for i, c := range causes {
			causes[i] = fmt.Sprintf("%d %s", e.Ended[c], c)
		}
		fmt.Fprintf(w, "  #%d-%d (%d runs, not kept one by one): %s; %.0f GPU-seconds, %.0f lost, $%.2f\n",
			e.First, e.Last, e.Count, strings.Join(causes, ", "), e.GPUSeconds, e.LostGPUSeconds, e.Dollars)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  #	POOL	CAPACITY	NODES	RAN	ENDED	RESUMED FROM	LOST GPU-S	COST\n")
	for _, a := range attempts {
		ran, ended := "", a.Ended
		if !a.EndedAt.IsZero() {
			ran = round(a.EndedAt.Sub(a.StartedAt)).String()
		}
		if ended == "" {
			ended = "running"
		}
		if a.By != "" {
			ended += " by " + a.By
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t$%.2f\n", a.Attempt, a.Pool, a.CapacityType,
			strings.Join(a.Nodes, ","), ran, ended, checkpointName(a.ResumedFrom), a.LostGPUSeconds, a.Dollars)
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
