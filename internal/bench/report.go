package bench

import (
	"fmt"
	"io"
	"time"
)

// WriteText writes the result as a table, a step a row, then the CPU per
// job of each step and the verdict.
func (r Result) WriteText(w io.Writer) {
	fmt.Fprintf(w, "gangway bench, %s, %d cores, load %.1f → %.1f: %d nodes × %d GPUs, %d pending\n", r.At.Format(time.RFC3339),
		r.Cores, r.LoadAvg[0], r.LoadAvg[1], r.Nodes, r.GPUs/max(r.Nodes, 1), r.Pending)
	fmt.Fprintf(w, "%8s %6s %6s %8s %8s %8s %8s %9s %10s %10s  %s\n", "RATE/S", "SUBMIT", "START", "P50 S", "P95 S", "P99 S",
		"STARTS/S", "MAX/5S", "CYCLE P50", "CYCLE P99", "CPU S (redis temporal gangway tasks)")
	for _, s := range r.Steps {
		note := ""
		if s.Saturated {
			note = "  saturated, busiest " + s.Busiest
		}
		fmt.Fprintf(w, "%8g %6d %6d %8.3f %8.3f %8.3f %8.1f %9.1f %8.1fms %8.1fms  %.1f %.1f %.1f %.1f%s\n", s.Rate, s.Submitted, s.Started,
			s.LatencyP50S, s.LatencyP95S, s.LatencyP99S, s.StartsPerS, s.StartsPerMax, s.CycleP50S*1000, s.CycleP99S*1000,
			s.CPU["redis"], s.CPU["temporal"], s.CPU["gangway"], s.CPU["tasks"], note)
	}
	fmt.Fprintf(w, "idle: %s cores\n", cpuLine(r.IdleCPU))
	for _, s := range r.Steps {
		fmt.Fprintf(w, "at %g/s: CPU ms per job (net of idle): %s; %d history events per job\n", s.Rate, cpuLine(s.CPUPerJob), s.HistoryEvents)
	}
	if r.SaturationRate > 0 {
		fmt.Fprintf(w, "saturated at %g submits/s (%s); busiest there: %s; peak sustained starts %.1f/s\n",
			r.SaturationRate, r.firstSaturated().Why, r.firstSaturated().Busiest, r.StartsPerSPeak)
	} else {
		fmt.Fprintf(w, "not saturated; peak sustained starts %.1f/s\n", r.StartsPerSPeak)
	}
}

func (r Result) firstSaturated() Step {
	for _, s := range r.Steps {
		if s.Saturated {
			return s
		}
	}
	return r.Step
}
