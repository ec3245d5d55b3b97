package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// WriteText writes the sweep: one row per policy, fleet and queue size,
// then per policy how the cycle time grows with fleet and queue size.
func (r *ScaleResult) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "Scale: one full placement cycle (placement.Place: session setup and every queued job placed or explained)\n")
	fmt.Fprintf(w, "synthetic fleets (racks of 9 nodes; 10%% GB200 racks in rack-scale NVLink domains, H100/A100 one domain a node, L4 none), %.0f%% of GPUs busy; seed %d; fastest of %d\n",
		100*r.Busy, r.Seed, r.Repeat)
	fmt.Fprintf(w, "engine: reservations %d, preemption %s, sampled nodes %s\n\n", r.Opts.Reservations, onOff(r.Opts.Preempt), sampleLine(r.Opts.SampleNodes))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tfleet\tGPUs\trunning\tqueue\tplaced\tms/cycle\tplacements/s\tjobs/s\tµs/job\t")
	for _, c := range r.byPolicy() {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%.1f\t%.0f\t%.0f\t%.1f\t\n", c.Policy, c.Fleet, c.GPUs, c.Running, c.Jobs, c.Placed,
			ms(c), c.PlacementsPerSec, c.JobsPerSec, 1e6*c.Cycle.Seconds()/float64(c.Jobs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fits := r.Growth()
	if len(fits) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\ngrowth (least squares over the sweep): ms/cycle ∝ nodes^a × queue^b")
	for _, g := range fits {
		fmt.Fprintf(w, "  %-12s a = %.2f, b = %.2f\n", g.Policy, g.NodesExp, g.JobsExp)
	}
	return nil
}

func sampleLine(n int) string {
	if n <= 0 {
		return "all"
	}
	return fmt.Sprint(n)
}

func ms(c ScaleCell) float64 { return 1000 * c.Cycle.Seconds() }

// Growth is a policy's fitted exponents: cycle time ∝ nodes^NodesExp ×
// jobs^JobsExp.
type Growth struct {
	Policy            string
	NodesExp, JobsExp float64
}

// Growth fits log(cycle) = c + a·log(nodes) + b·log(jobs) per policy, by
// least squares; policies whose sweep does not vary both are left out.
func (r *ScaleResult) Growth() []Growth {
	var out []Growth
	var order []string
	cells := map[string][]ScaleCell{}
	for _, c := range r.Cells {
		if _, ok := cells[c.Policy]; !ok {
			order = append(order, c.Policy)
		}
		cells[c.Policy] = append(cells[c.Policy], c)
	}
	for _, p := range order {
		a, b, ok := fitGrowth(cells[p])
		if ok {
			out = append(out, Growth{Policy: p, NodesExp: a, JobsExp: b})
		}
	}
	return out
}

// fitGrowth solves the 3×3 normal equations of y = c + a·x1 + b·x2.
func fitGrowth(cs []ScaleCell) (a, b float64, ok bool) {
	n := float64(len(cs))
	if n < 3 {
		return 0, 0, false
	}
	var m1, m2, my float64
	for _, c := range cs {
		m1 += math.Log(float64(c.Fleet.Nodes))
		m2 += math.Log(float64(c.Jobs))
		my += math.Log(c.Cycle.Seconds())
	}
	m1, m2, my = m1/n, m2/n, my/n
	var s11, s22, s12, s1y, s2y float64
	for _, c := range cs {
		x1, x2, y := math.Log(float64(c.Fleet.Nodes))-m1, math.Log(float64(c.Jobs))-m2, math.Log(c.Cycle.Seconds())-my
		s11 += x1 * x1
		s22 += x2 * x2
		s12 += x1 * x2
		s1y += x1 * y
		s2y += x2 * y
	}
	det := s11*s22 - s12*s12
	if s11 == 0 || s22 == 0 || math.Abs(det) < 1e-12 {
		return 0, 0, false
	}
	return (s1y*s22 - s2y*s12) / det, (s2y*s11 - s1y*s12) / det, true
}

// ScaleJSON is one cell of `gangway replay scale --output json`.
type ScaleJSON struct {
	Policy           string  `json:"policy"`
	Nodes            int     `json:"nodes"`
	GPUsPerNode      int     `json:"gpus_per_node"`
	GPUs             int     `json:"gpus"`
	Running          int     `json:"running"`
	Jobs             int     `json:"jobs"`
	Placed           int     `json:"placed"`
	MsPerCycle       float64 `json:"ms_per_cycle"`
	PlacementsPerSec float64 `json:"placements_per_second"`
	JobsPerSec       float64 `json:"jobs_per_second"`
	SampleNodes      int     `json:"sample_nodes"`
}

// WriteJSON writes one JSON object per cell, one per line.
func (r *ScaleResult) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, c := range r.byPolicy() {
		o := ScaleJSON{Policy: c.Policy, Nodes: c.Fleet.Nodes, GPUsPerNode: c.Fleet.GPUsPerNode, GPUs: c.GPUs, Running: c.Running,
			Jobs: c.Jobs, Placed: c.Placed, MsPerCycle: math.Round(ms(c)*1000) / 1000,
			PlacementsPerSec: math.Round(c.PlacementsPerSec), JobsPerSec: math.Round(c.JobsPerSec), SampleNodes: r.Opts.SampleNodes}
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
