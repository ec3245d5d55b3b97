package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
)

// fencedGPUs counts a node's GPUs out of service.
func fencedGPUs(n client.Node) int {
	k := 0
	for _, g := range n.Node.GPUs {
		if !g.Healthy {
			k++
		}
	}
	return k
}

// printGPUHealth lists GPU by GPU the ones that are fenced, flaky or have
// faulted (every GPU with all), with the job on each and its last fault.
func printGPUHealth(w io.Writer, nodes []client.Node, all bool, now time.Time) error {
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
