package sim

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

func TestParseFleetSpec(t *testing.T) {
	tests := map[string]struct {
		want     FleetSpec
		wantOK   bool
		wantErr  bool
		wantList bool
	}{
		"10000x8":   {want: FleetSpec{10000, 8}, wantOK: true},
		" 9X4 ":     {want: FleetSpec{9, 4}, wantOK: true},
		"nodes.csv": {},
		"0x8":       {wantOK: true, wantErr: true},
		"10x100":    {wantOK: true, wantErr: true},
	}
	for in, tc := range tests {
		got, ok, err := ParseFleetSpec(in)
		if got != tc.want || ok != tc.wantOK || (err != nil) != tc.wantErr {
			t.Errorf("ParseFleetSpec(%q) = %v, %v, %v; want %v, %v, error %v", in, got, ok, err, tc.want, tc.wantOK, tc.wantErr)
		}
	}
	if _, err := ParseFleetSpecs("1000x8,nodes.csv"); err == nil {
		t.Error("ParseFleetSpecs with a file name: want an error")
	}
	if got, err := ParseCounts("1000, 5k"); err != nil || !cmp.Equal(got, []int{1000, 5000}) {
		t.Errorf("ParseCounts = %v, %v; want [1000 5000]", got, err)
	}
	if _, err := ParseCounts("0"); err == nil {
		t.Error("ParseCounts(0): want an error")
	}
}

// The synthetic fleet: racks of 9 nodes, GB200 racks one NVLink domain of
// 72 GPUs, H100/A100 nodes one domain each, L4 none; the same for a seed.
func TestSyntheticFleet(t *testing.T) {
	nodes := SyntheticFleet(FleetSpec{Nodes: 1000, GPUsPerNode: 8}, 1)
	if len(nodes) != 1000 {
		t.Fatalf("%d nodes, want 1000", len(nodes))
	}
	domains := map[string]int{}
	models := map[string]int{}
	for _, n := range nodes {
		models[n.Model]++
		if len(n.GPUs) != 8 || !n.Schedulable {
			t.Fatalf("node %s: %d GPUs, schedulable %v", n.ID, len(n.GPUs), n.Schedulable)
		}
		for _, g := range n.GPUs {
			switch {
			case n.Model == "L4" && g.Domain != "":
				t.Fatalf("L4 node %s has an NVLink domain", n.ID)
			case n.Model != "L4" && g.Domain == "":
				t.Fatalf("%s node %s has no NVLink domain", n.Model, n.ID)
			}
			if g.Domain != "" {
				domains[g.Domain]++
			}
		}
	}
	for d, n := range domains {
		switch {
		case strings.HasPrefix(d, "nvl72-") && n != 72 && !strings.HasSuffix(d, "rack-111"):
			t.Errorf("rack-scale domain %s has %d GPUs, want 72", d, n)
		case strings.HasPrefix(d, "nvl-") && n != 8:
			t.Errorf("node domain %s has %d GPUs, want 8", d, n)
		}
	}
	for _, m := range SyntheticModels {
		if models[m] == 0 {
			t.Errorf("no %s nodes in 1000", m)
		}
	}
	if diff := cmp.Diff(nodes, SyntheticFleet(FleetSpec{Nodes: 1000, GPUsPerNode: 8}, 1)); diff != "" {
		t.Errorf("same seed, different fleet:\n%s", diff)
	}
}

func TestSyntheticQueue(t *testing.T) {
	q := SyntheticQueue(2000, 8, TraceEpoch, 1)
	var gangs, biggest, shares, cpuOnly int
	for _, j := range q {
		switch {
		case j.Replicas > 1:
			gangs++
			biggest = max(biggest, j.Replicas*j.GPUsPerReplica)
			if j.Topology.Level == gangway.LevelNVLink && j.Topology.Required && j.Replicas > 9 {
				t.Errorf("job %s: %d replicas required in one NVLink domain (72 GPUs)", j.JobID, j.Replicas)
			}
		case j.Share():
			shares++
		case j.GPUsPerReplica == 0:
			cpuOnly++
		}
	}
	if gangs < 50 || shares < 300 || cpuOnly < 20 || biggest < 200 {
		t.Errorf("gangs %d (largest %d GPUs) shares %d CPU-only %d: want the documented mix", gangs, biggest, shares, cpuOnly)
	}
	if diff := cmp.Diff(q, SyntheticQueue(2000, 8, TraceEpoch, 1)); diff != "" {
		t.Errorf("same seed, different queue:\n%s", diff)
	}
}

// FillFleet marks what its running jobs hold, and never double-books.
func TestFillFleet(t *testing.T) {
	nodes := SyntheticFleet(FleetSpec{Nodes: 90, GPUsPerNode: 8}, 3)
	snap := FillFleet(nodes, 0.4, TraceEpoch, 3)
	used := 0
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			if g.UsedMilli > 0 {
				used++
			}
		}
	}
	held := 0
	seen := map[[2]any]bool{}
	for _, r := range snap.Running {
		for _, m := range r.Members {
			for _, g := range m.GPUs {
				k := [2]any{m.NodeID, g}
				if seen[k] {
					t.Fatalf("GPU %s/%d held twice", m.NodeID, g)
				}
				seen[k] = true
				held++
			}
		}
	}
	if held != used || used < int(0.4*720) || used > int(0.4*720)+8 {
		t.Errorf("%d GPUs used on nodes, %d held by running jobs; want equal, about 40%% of 720", used, held)
	}
	for _, n := range nodes {
		for _, g := range n.GPUs {
			if g.UsedMilli != 0 {
				t.Fatal("FillFleet changed the fleet it was given")
			}
		}
	}
}

func TestRunScaleSmall(t *testing.T) {
	res, err := RunScale(context.Background(), ScaleConfig{
		Fleets: []FleetSpec{{Nodes: 50, GPUsPerNode: 8}, {Nodes: 100, GPUsPerNode: 8}}, Jobs: []int{100, 200},
		Policies: []string{"first-fit", "gangway"}, NewScorer: baselines.ScorerByName, Busy: 0.3, Seed: 1,
		Options: placement.Options{Reservations: 4, Preempt: true, MinRuntime: 10 * time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cells) != 8 {
		t.Fatalf("%d cells, want 2 fleets x 2 queues x 2 policies", len(res.Cells))
	}
	for _, c := range res.Cells {
		if c.Placed+c.Unplaced != c.Jobs || c.Placed == 0 || c.Cycle <= 0 || c.Running == 0 {
			t.Errorf("cell %+v: every job placed or explained, some placed, a positive cycle time, running jobs", c)
		}
	}
	var text, js strings.Builder
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(js.String(), "\n"); got != 8 {
		t.Errorf("%d JSON lines, want 8", got)
	}
	if !strings.Contains(text.String(), "ms/cycle ∝ nodes^a × queue^b") {
		t.Errorf("text report has no growth fit:\n%s", text.String())
	}
}

func TestFitGrowth(t *testing.T) {
	// cycle = 1µs × nodes^1 × jobs^0.5, exactly.
	var cells []ScaleCell
	for _, n := range []int{1000, 2000, 5000} {
		for _, j := range []int{1000, 10000} {
			d := time.Duration(1e3 * float64(n) * math.Sqrt(float64(j)))
			cells = append(cells, ScaleCell{Fleet: FleetSpec{Nodes: n, GPUsPerNode: 8}, Jobs: j, Cycle: d})
		}
	}
	a, b, ok := fitGrowth(cells)
	if !ok || math.Abs(a-1) > 1e-6 || math.Abs(b-0.5) > 1e-6 {
		t.Errorf("fit a=%g b=%g ok=%v, want 1, 0.5", a, b, ok)
	}
	if _, _, ok := fitGrowth(cells[:2]); ok {
		t.Error("fit over one fleet size: want no fit")
	}
}
