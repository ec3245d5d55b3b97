package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway/placement/baselines"
)

func TestGenerateMixHitsTargets(t *testing.T) {
	nodes, tasks := loadDefault(t)
	src := MeasureMix(tasks)
	tests := []struct {
		name  string
		mix   Mix
		check func(t *testing.T, got MixStats)
	}{
		{"share 20%", Mix{Share: 0.2, Multi: Keep, Spec: Keep, CPU: Keep}, func(t *testing.T, got MixStats) {
			near(t, "share", got.Share, 0.2, 0.002)
			same(t, "GPU tasks", got.GPUTasks, src.GPUTasks)
			same(t, "CPU-only demand", got.CPUOnlyMilli, src.CPUOnlyMilli)
		}},
		{"share 100%", Mix{Share: 1, Multi: Keep, Spec: Keep, CPU: Keep}, func(t *testing.T, got MixStats) {
			near(t, "share", got.Share, 1, 0)
			near(t, "multi", got.Multi, 0, 0)
			same(t, "GPU tasks", got.GPUTasks, src.GPUTasks)
		}},
		{"multi 50%", Mix{Share: Keep, Multi: 0.5, Spec: Keep, CPU: Keep}, func(t *testing.T, got MixStats) {
			near(t, "multi", got.Multi, 0.5, 0.005)
			same(t, "GPU tasks", got.GPUTasks, src.GPUTasks)
			same(t, "CPU-only tasks", got.CPUOnly, src.CPUOnly)
		}},
		{"spec 33%", Mix{Share: Keep, Multi: Keep, Spec: 0.33, CPU: Keep}, func(t *testing.T, got MixStats) {
			near(t, "spec", got.Spec, 0.33, 0.0005)
			near(t, "share", got.Share, src.Share, 0)
			near(t, "multi", got.Multi, src.Multi, 0)
		}},
		{"cpu 0", Mix{Share: Keep, Multi: Keep, Spec: Keep, CPU: 0}, func(t *testing.T, got MixStats) {
			same(t, "CPU-only tasks", got.CPUOnly, 0)
			same(t, "GPU tasks", got.GPUTasks, src.GPUTasks)
		}},
		{"cpu 300%", Mix{Share: Keep, Multi: Keep, Spec: Keep, CPU: 3}, func(t *testing.T, got MixStats) {
			r := float64(got.CPUOnlyMilli) / float64(src.CPUOnlyMilli)
			near(t, "CPU-only demand ratio", r, 3, 0.005)
			near(t, "share", got.Share, src.Share, 0)
		}},
		{"cpu 50%", Mix{Share: Keep, Multi: Keep, Spec: Keep, CPU: 0.5}, func(t *testing.T, got MixStats) {
			r := float64(got.CPUOnlyMilli) / float64(src.CPUOnlyMilli)
			near(t, "CPU-only demand ratio", r, 0.5, 0.005)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := GenerateMix(tasks, nodes, tt.mix, nil, 3)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, MeasureMix(out))
			seen := map[string]bool{}
			for _, task := range out {
				if seen[task.Name] {
					t.Fatalf("task name %q twice", task.Name)
				}
				seen[task.Name] = true
			}
			again, err := GenerateMix(tasks, nodes, tt.mix, nil, 3)
			if err != nil || !cmp.Equal(out, again) {
				t.Errorf("same seed, another list (err %v)", err)
			}
			other, _ := GenerateMix(tasks, nodes, tt.mix, nil, 4)
			if tt.mix.CPU != 0 && cmp.Equal(out, other) {
				t.Errorf("seeds 3 and 4 give the same list")
			}
		})
	}
}

func TestGenerateMixConstraintsFitTheFleet(t *testing.T) {
	nodes, tasks := loadDefault(t)
	out, err := GenerateMix(tasks, nodes, Mix{Share: Keep, Multi: Keep, Spec: 0.33, CPU: Keep}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	fits := newFitIndex(nodes)
	byModel := map[string]int{}
	for i := range out {
		if len(out[i].Models) == 0 {
			continue
		}
		if !fits.any(&out[i], out[i].Models) {
			t.Errorf("%s (%d GPUs) constrained to %v, which no node of those models fits", out[i].Name, out[i].NumGPU, out[i].Models)
		}
		byModel[strings.Join(out[i].Models, "|")]++
	}
	// The pool's weights show: T4 alone is the most common constraint.
	top := ""
	for m, n := range byModel {
		if top == "" || n > byModel[top] {
			top = m
		}
	}
	if top != "T4" {
		t.Errorf("most common constraint %q (%v), want T4 as in gpuspec10", top, byModel)
	}
	// Constraints are only added: the GPU shapes are the source's.
	shapes := func(ts []Task) []int64 {
		var s []int64
		for _, t := range ts {
			s = append(s, t.GPUMilliTotal()*1e6+t.CPUMilli)
		}
		slices.Sort(s)
		return s
	}
	if !slices.Equal(shapes(out), shapes(tasks)) {
		t.Error("spec changed tasks other than their models")
	}
}

func TestGenerateMixErrors(t *testing.T) {
	nodes, tasks := loadDefault(t)
	var gpuOnly []Task
	for _, t := range tasks {
		if t.NumGPU > 0 {
			gpuOnly = append(gpuOnly, t)
		}
	}
	tests := []struct {
		name  string
		tasks []Task
		mix   Mix
		field string
	}{
		{"share above 1", tasks, Mix{Share: 1.5, Multi: Keep, Spec: Keep, CPU: Keep}, "share"},
		{"multi of 1", tasks, Mix{Share: Keep, Multi: 1, Spec: Keep, CPU: Keep}, "multi"},
		{"spec NaN", tasks, Mix{Share: Keep, Multi: Keep, Spec: math.NaN(), CPU: Keep}, "spec"},
		{"share and multi past 1", tasks, Mix{Share: 0.7, Multi: 0.5, Spec: Keep, CPU: Keep}, "share"},
		{"cpu with no CPU-only tasks", gpuOnly, Mix{Share: Keep, Multi: Keep, Spec: Keep, CPU: 2}, "cpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := GenerateMix(tt.tasks, nodes, tt.mix, nil, 1)
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field != tt.field {
				t.Errorf("err = %v, want an InputError on %q", err, tt.field)
			}
		})
	}
}

func TestParseSweep(t *testing.T) {
	got, err := ParseSweep(DefaultSweep)
	if err != nil || len(got) != 17 {
		t.Fatalf("ParseSweep(DefaultSweep) = %d points, %v", len(got), err)
	}
	if got[0] != (SweepPoint{Knob: "share", Value: 0.2}) || got[16] != (SweepPoint{Knob: "cpu", Value: 3}) {
		t.Errorf("points %v ... %v", got[0], got[16])
	}
	for _, bad := range []string{"", "share", "colour=0.2", "share=x", "spec=1.2", "multi=1", "cpu=-1"} {
		if _, err := ParseSweep(bad); err == nil {
			t.Errorf("ParseSweep(%q) accepted", bad)
		}
	}
}

// sweepKnownWorse are the runs of TestSweepNeverWorseThanFGD on which
// Gangway's default still leaves more GPU unallocated than FGD (issue 16,
// part 2, is not done): point and seed. Remove an entry when a change
// fixes it; the test fails on any run outside the list, and on an entry
// that no longer is worse. multi=40% seed 42 and multi=50% seed 43 left
// it with the multi-GPU classes' room term (placement/bigsupply.go),
// multi=20% seed 43, the last, when the packing term began to count the
// CPU share tasks need (packPrices.nodeShortfall).
var sweepKnownWorse = map[string]bool{}

// TestSweepNeverWorseThanFGD is the sweep's check in small: every point of
// DefaultSweep on every 4th node of the GPU node list (304 nodes, 1,548
// GPUs), seeds 42-43, Gangway's default against FGD. Gangway must leave no
// more GPU unallocated at 100% than FGD on any point and seed, except the
// runs in sweepKnownWorse. The full sweep (all nodes, seeds 42-51,
// best-fit too) is `gangway replay sweep --check 1`, in
// docs/benchmarks.md.
func TestSweepNeverWorseThanFGD(t *testing.T) {
	if testing.Short() {
		t.Skip("a sweep of 17 points: not in -short")
	}
	nodes, tasks := loadDefault(t)
	points, err := ParseSweep(DefaultSweep)
	if err != nil {
		t.Fatal(err)
	}
	cfg := SweepConfig{FGDConfig: FGDConfig{Nodes: SweepNodes(nodes, 4), Tasks: tasks, Policies: []string{GangwayPolicy, "fgd"},
		Seeds: []int64{42, 43}, NewScorer: baselines.ScorerByName}, Points: points}
	res, err := RunSweep(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := res.WriteText(&table, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	worse := map[string]bool{}
	for _, v := range res.Worse(GangwayPolicy, "fgd", 1) {
		key := fmt.Sprintf("%s seed %d", v.Point, v.Seed)
		worse[key] = true
		if !sweepKnownWorse[key] {
			t.Errorf("gangway worse than fgd: %s", v)
		} else {
			t.Logf("known: gangway worse than fgd: %s", v)
		}
	}
	for key := range sweepKnownWorse {
		if !worse[key] {
			t.Errorf("%s: gangway no longer worse than fgd; remove it from sweepKnownWorse", key)
		}
	}
	if err := res.WritePlot(filepath.Join(t.TempDir(), "sweep.png")); err != nil {
		t.Fatal(err)
	}
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.4f, want %.4f ± %g", what, got, want, tol)
	}
}

func same[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// TestGenerateMixKeepsArrivals: a copy that replaces a task arrives when
// that task did, so the variant keeps the source's arrival times (as a
// multiset) while the copies keep their own run times.
func TestGenerateMixKeepsArrivals(t *testing.T) {
	nodes, tasks := loadDefault(t)
	out, err := GenerateMix(tasks, nodes, Mix{Share: Keep, Multi: 0.3, Spec: Keep, CPU: Keep}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	arrivals := func(ts []Task) []int64 {
		var a []int64
		for i := range ts {
			a = append(a, ts[i].Creation)
		}
		slices.Sort(a)
		return a
	}
	if !slices.Equal(arrivals(tasks), arrivals(out)) {
		t.Errorf("the mix's arrival times differ from the source's")
	}
	byName := map[string]Task{}
	for _, s := range tasks {
		byName[s.Name] = s
	}
	copies := 0
	for _, c := range out {
		src, _, ok := strings.Cut(c.Name, "-mix-")
		if !ok {
			continue
		}
		copies++
		s := byName[src]
		if hasDuration(&s) && c.Deletion-c.Scheduled != s.Deletion-s.Scheduled {
			t.Errorf("%s runs %d s, its source %s %d s", c.Name, c.Deletion-c.Scheduled, src, s.Deletion-s.Scheduled)
		}
	}
	if copies == 0 {
		t.Fatal("the mix made no copies")
	}
}

func TestParseMix(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    Mix
		wantErr string
	}{
		"one knob":      {in: "multi=0.4", want: Mix{Share: Keep, Multi: 0.4, Spec: Keep, CPU: Keep}},
		"two knobs":     {in: "share=0.2, cpu=2", want: Mix{Share: 0.2, Multi: Keep, Spec: Keep, CPU: 2}},
		"unknown knob":  {in: "gang=0.5", wantErr: `mix "gang=0.5": unknown knob "gang" (want share, multi, spec or cpu)`},
		"no value":      {in: "multi", wantErr: `mix "multi": want knob=value[,knob=value] (knobs share, multi, spec, cpu; values 0 or more), got "multi"`},
		"out of range":  {in: "multi=1", wantErr: `mix "multi=1": multi: 1: want a share 0 to below 1 (or negative to keep the task list's)`},
		"too much, two": {in: "share=0.7,multi=0.5", wantErr: `mix "share=0.7,multi=0.5": share: share 0.7 + multi 0.5: want at most 1 together`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseMix(tc.in)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("ParseMix(%q) error %v, want %s", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseMix(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}
