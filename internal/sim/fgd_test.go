package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

func loadDefault(t testing.TB) ([]placement.Node, []Task) {
	t.Helper()
	nodes, err := LoadOpenBNodes(tracePath(t, "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := LoadOpenBTasks(tracePath(t, "openb_pod_list_default.csv"))
	if err != nil {
		t.Fatal(err)
	}
	return nodes, tasks
}

func names(tasks []Task) []string {
	out := make([]string, len(tasks))
	for i := range tasks {
		out[i] = tasks[i].Name
	}
	return out
}

func TestShuffleSeeded(t *testing.T) {
	_, tasks := loadDefault(t)
	a := Shuffle(tasks, rand.New(rand.NewSource(42)))
	b := Shuffle(tasks, rand.New(rand.NewSource(42)))
	c := Shuffle(tasks, rand.New(rand.NewSource(43)))
	if diff := cmp.Diff(names(a), names(b)); diff != "" {
		t.Errorf("same seed, different order (-a +b):\n%s", diff)
	}
	if slices.Equal(names(a), names(c)) {
		t.Error("seeds 42 and 43 gave the same order")
	}
	// The same tasks, reordered: the input is not modified.
	if got := names(sortedByName(a)); !slices.Equal(got, names(tasks)) {
		t.Error("shuffle lost or added tasks")
	}
	if tasks[0].Name != "openb-pod-0000" {
		t.Errorf("input reordered: first task %s", tasks[0].Name)
	}
}

func TestTuneSeeded(t *testing.T) {
	nodes, tasks := loadDefault(t)
	capacity := GPUCapacityMilli(nodes)
	tests := map[string]struct {
		ratio    float64
		wantMore bool // copies added (else tasks dropped)
	}{
		"up to 1.3x":   {ratio: 1.3, wantMore: true},
		"down to 0.5x": {ratio: 0.5},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			run := func(seed int64) []Task {
				rnd := rand.New(rand.NewSource(seed))
				return Tune(Shuffle(tasks, rnd), tasks, capacity, tc.ratio, rnd)
			}
			a, b, c := run(42), run(42), run(43)
			if diff := cmp.Diff(a, b); diff != "" {
				t.Fatalf("same seed, different tuning (-a +b):\n%s", diff)
			}
			if cmp.Equal(a, c) {
				t.Error("seeds 42 and 43 tuned alike")
			}
			target := tc.ratio * float64(capacity)
			got := float64(DemandMilli(a))
			// Within an 8-GPU task of the target: below it when dropping;
			// when adding, the artifact's per-GPU check lets a last
			// multi-GPU copy pass it by up to 7 GPUs.
			if got < target-8*placement.Whole || got > target+7*placement.Whole || (!tc.wantMore && got > target) {
				t.Errorf("demand %.0f, want within 8 GPUs of the target %.0f", got, target)
			}
			if more := len(a) > len(tasks); more != tc.wantMore {
				t.Errorf("%d tasks from %d: grew = %v, want %v", len(a), len(tasks), more, tc.wantMore)
			}
			byName := map[string]Task{}
			for _, task := range tasks {
				byName[task.Name] = task
			}
			seen := map[string]bool{}
			for _, task := range a {
				if seen[task.Name] {
					t.Fatalf("task %s twice", task.Name)
				}
				seen[task.Name] = true
				orig, _, _ := strings.Cut(task.Name, "-tuned-")
				want := byName[orig]
				want.Name = task.Name
				if diff := cmp.Diff(want, task); diff != "" {
					t.Fatalf("task %s is not a copy of %s (-want +got):\n%s", task.Name, orig, diff)
				}
			}
		})
	}
}

// The artifact's arrival sequence is pinned: math/rand v1 seeded with 42,
// one Int draw, shuffle of the name-sorted list. A change here changes
// which tasks arrive when and no longer replays the paper's runs.
func TestPrepareReproducible(t *testing.T) {
	nodes, tasks := loadDefault(t)
	a := Prepare(nodes, tasks, 42, DefaultTuneRatio)
	b := Prepare(nodes, tasks, 42, DefaultTuneRatio)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("Prepare(42) twice differs (-a +b):\n%s", diff)
	}
	c := Prepare(nodes, tasks, 43, DefaultTuneRatio)
	if slices.Equal(names(a.Tasks[:50]), names(c.Tasks[:50])) {
		t.Error("seeds 42 and 43 give the same arrivals")
	}
	if len(a.Nodes) != len(nodes) {
		t.Fatalf("%d nodes, want %d", len(a.Nodes), len(nodes))
	}
	ids := func(ns []placement.Node) []string {
		out := make([]string, len(ns))
		for i := range ns {
			out[i] = ns[i].ID
		}
		return out
	}
	if slices.Equal(ids(a.Nodes), ids(nodes)) {
		t.Error("node order not permuted")
	}
	if got := ids(a.Nodes); !slices.Equal(slices.Sorted(slices.Values(got)), ids(nodes)) {
		t.Error("permuted node list is not the same nodes")
	}
	want := []string{"openb-pod-0255", "openb-pod-1685", "openb-pod-6784"}
	if got := names(a.Tasks[:3]); !slices.Equal(got, want) {
		t.Errorf("first arrivals for seed 42 = %v, want %v", got, want)
	}
}

// Prepare replays the artifact's arrival sequence exactly: its expected
// results (experiments/analysis/expected_results/analysis_allo_discrete.csv
// in hkust-adsl/kubernetes-scheduler-simulator) give, per seed, the mean
// allocated GPU % over the arrivals whose arrived % rounds to 0, 1, 2, ...;
// while nothing has failed yet, allocated = arrived, so those values
// depend on the arrival order alone.
func TestPrepareMatchesArtifact(t *testing.T) {
	tests := map[string]struct {
		tasks string
		seed  int64
		want  []float64 // bins 0-10
	}{
		"default seed 42": {tasks: "openb_pod_list_default.csv", seed: 42,
			want: []float64{0.25, 1.04, 2.01, 3.01, 3.98, 5.06, 5.98, 7.02, 8.03, 8.99, 10.03}},
		"cpu050 seed 42": {tasks: "openb_pod_list_cpu050.csv", seed: 42,
			want: []float64{0.25, 0.99, 2.0, 2.99, 4.03, 4.97, 6.07, 6.96, 7.93, 8.98, 9.99}},
	}
	nodes, err := LoadOpenBNodes(tracePath(t, "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	capacity := float64(GPUCapacityMilli(nodes))
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tasks, err := LoadOpenBTasks(tracePath(t, tc.tasks))
			if err != nil {
				t.Fatal(err)
			}
			tr := Prepare(nodes, tasks, tc.seed, DefaultTuneRatio)
			sum := make([]float64, len(tc.want))
			n := make([]int, len(tc.want))
			var arrived int64
			for i := range tr.Tasks {
				arrived += tr.Tasks[i].GPUMilliTotal()
				pct := 100 * float64(arrived) / capacity
				b := int(math.RoundToEven(pct))
				if b >= len(tc.want) {
					break
				}
				sum[b] += math.Round(pct*100) / 100
				n[b]++
			}
			got := make([]float64, len(tc.want))
			for b := range got {
				got[b] = math.Round(sum[b]/float64(n[b])*100) / 100
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 0.011)); diff != "" {
				t.Errorf("allocated %% by arrived %% bin (-artifact +replay):\n%s", diff)
			}
		})
	}
}

func TestTypicalWorkload(t *testing.T) {
	task := func(n, cpu, mem int64, gpus, milli int) Task {
		return Task{Name: string(rune('a' + n)), CPUMilli: cpu, MemMiB: mem, NumGPU: gpus, GPUMilli: milli}
	}
	// 20 tasks: 10 shares (memory differs, same class), 6 whole GPUs,
	// 3 CPU-only, 1 8-GPU task. 95% of 20 = 19 tasks: the 8-GPU class (5%)
	// is left out and the rest renormalized over 19.
	var tasks []Task
	for i := range 10 {
		tasks = append(tasks, task(int64(i), 4000, int64(100*i), 1, 500))
	}
	for i := range 6 {
		tasks = append(tasks, task(int64(10+i), 8000, 1, 1, 1000))
	}
	for i := range 3 {
		tasks = append(tasks, task(int64(16+i), 2000, 1, 0, 0))
	}
	tasks = append(tasks, task(19, 64000, 1, 8, 1000))
	got := TypicalWorkload(tasks, TypicalPopularity)
	want := []placement.WorkloadClass{
		{GPUs: 1, Milli: 500, CPUMilli: 4000, Weight: 10.0 / 19},
		{GPUs: 1, Milli: 1000, CPUMilli: 8000, Weight: 6.0 / 19},
		{GPUs: 0, Milli: 0, CPUMilli: 2000, Weight: 3.0 / 19},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("TypicalWorkload (-want +got):\n%s", diff)
	}
}

// A hand-computed scenario: two nodes, five tasks placed first-fit,
// unallocated and fragmented GPU after each arrival and at 100%.
//
//	n0: 2 GPUs, 16 CPUs     n1: 1 GPU, 4 CPUs      capacity 3000 milli
//	workload: 50% 1x500m share, 50% 1 whole GPU, both with 1 CPU
//
//	task              placed on   n0 free GPU   arrived  free  frag
//	t1 share 300m     n0 GPU 0    [700 1000]     300     2700  350 (n0: the 700 is below a whole GPU, x0.5)
//	t2 share 700m     n0 GPU 0    [0 1000]      1000     2000    0
//	t3 2 whole GPUs   failed                    3000     2000    0
//	t4 CPU-only 13.5  n0 (0.5 CPU left)         3000     2000 1000 (n0: no class fits its CPU: all 1000 free)
//	t5 1 whole GPU    n1                        4000     1000 1000
//
// At 100% (t3 and t4): unallocated 2000/3000 = 66.67%, fragmented
// (0 + 1000)/2 / 3000 = 16.67%, one task failed.
func TestFGDHandComputed(t *testing.T) {
	gpus := func(n int) []placement.GPU {
		out := make([]placement.GPU, n)
		for i := range out {
			out[i] = placement.GPU{Index: i, Model: "A", Healthy: true}
		}
		return out
	}
	nodes := []placement.Node{
		{ID: "n0", Pool: OpenBPool, Model: "A", CPUMilli: 16000, MemMiB: 1 << 20, GPUs: gpus(2), Schedulable: true},
		{ID: "n1", Pool: OpenBPool, Model: "A", CPUMilli: 4000, MemMiB: 1 << 20, GPUs: gpus(1), Schedulable: true},
	}
	tasks := []Task{
		{Name: "t1", CPUMilli: 1000, NumGPU: 1, GPUMilli: 300},
		{Name: "t2", CPUMilli: 1000, NumGPU: 1, GPUMilli: 700},
		{Name: "t3", CPUMilli: 1000, NumGPU: 2, GPUMilli: 1000},
		{Name: "t4", CPUMilli: 13500},
		{Name: "t5", CPUMilli: 1000, NumGPU: 1, GPUMilli: 1000},
	}
	workload := []placement.WorkloadClass{
		{GPUs: 1, Milli: 500, CPUMilli: 1000, Weight: 0.5},
		{GPUs: 1, Milli: 1000, CPUMilli: 1000, Weight: 0.5},
	}
	cfg := FGDConfig{NewScorer: func(string) (placement.Scorer, error) { return placement.FirstFit{}, nil }}
	run, err := runTrial(context.Background(), &cfg, Trial{Seed: 1, Nodes: nodes, Tasks: tasks}, "first-fit", workload, nil, newProgress(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	want := []Point{
		{ArrivedMilli: 300, FreeMilli: 2700, FragMilli: 350, Placed: true},
		{ArrivedMilli: 1000, FreeMilli: 2000, FragMilli: 0, Placed: true},
		{ArrivedMilli: 3000, FreeMilli: 2000, FragMilli: 0, Failed: 1},
		{ArrivedMilli: 3000, FreeMilli: 2000, FragMilli: 1000, Failed: 1, Placed: true},
		{ArrivedMilli: 4000, FreeMilli: 1000, FragMilli: 1000, Failed: 1, Placed: true},
	}
	if diff := cmp.Diff(want, run.Points, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("points (-want +got):\n%s", diff)
	}
	if math.Abs(run.UnallocatedAt100-200.0/3) > 1e-9 || math.Abs(run.FragAt100-50.0/3) > 1e-9 ||
		run.FailedAt100 != 1 || run.Failed != 1 {
		t.Errorf("at 100%%: unallocated %.4f%% frag %.4f%% failed %d (total %d); want 66.6667%% 16.6667%% 1 (1)",
			run.UnallocatedAt100, run.FragAt100, run.FailedAt100, run.Failed)
	}
}

// The incremental meter agrees with placement's whole-cluster measurement.
func TestMeterMatchesClusterFragmentation(t *testing.T) {
	nodes, tasks := loadDefault(t)
	tr := Prepare(nodes[:100], tasks, 42, DefaultTuneRatio)
	workload := TypicalWorkload(tasks, TypicalPopularity)
	sc, err := baselines.ScorerByName("best-fit")
	if err != nil {
		t.Fatal(err)
	}
	sess := placement.NewSession(placement.Snapshot{Nodes: tr.Nodes}, placement.Options{Scorer: sc, Seed: 42, Workload: workload})
	m := newMeter(sess.View())
	for k := range tr.Tasks {
		plan := sess.Place([]gangway.QueueEntry{tr.Tasks[k].Job()})
		for _, a := range plan.Assignments {
			for _, mb := range a.Members {
				m.update(mb.NodeID)
			}
		}
		if k%97 != 0 && k != len(tr.Tasks)-1 {
			continue
		}
		frag, free := placement.ClusterFragmentation(sess.View())
		if math.Abs(frag-m.frag) > 1e-6 || int64(free) != m.free {
			t.Fatalf("after %d arrivals: meter frag %.3f free %d, ClusterFragmentation %.3f %.0f", k+1, m.frag, m.free, frag, free)
		}
	}
}

// One protocol run on a sample (the first 200 nodes, one seed, every
// policy) completes, and its numbers are sane.
func TestRunFGDSample(t *testing.T) {
	nodes, tasks := loadDefault(t)
	cfg := FGDConfig{
		Nodes: nodes[:200], Tasks: tasks, Policies: FGDPolicies, Seeds: []int64{42},
		NewScorer: baselines.ScorerByName,
	}
	res, err := RunFGD(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Policies) != len(FGDPolicies) {
		t.Fatalf("%d policy results, want %d", len(res.Policies), len(FGDPolicies))
	}
	for _, p := range res.Policies {
		r := p.Runs[0]
		last := r.Points[len(r.Points)-1]
		arrived := 100 * float64(last.ArrivedMilli) / float64(r.CapacityMilli)
		if arrived < 125 || arrived > 130 {
			t.Errorf("%s: arrived %.1f%% at the end, want about 130%%", p.Policy, arrived)
		}
		if !(r.UnallocatedAt100 > 0 && r.UnallocatedAt100 < 50) || !(r.FragAt100 >= 0 && r.FragAt100 <= r.UnallocatedAt100) {
			t.Errorf("%s: unallocated %.2f%%, frag %.2f%% at 100%%", p.Policy, r.UnallocatedAt100, r.FragAt100)
		}
		if r.Failed == 0 {
			t.Errorf("%s: nothing failed at 130%% of capacity", p.Policy)
		}
	}
	if res.BestBaseline == "" || res.BestBaseline == GangwayPolicy {
		t.Errorf("best baseline %q", res.BestBaseline)
	}

	// The outputs: a table row, a JSON line and a series per policy, a plot.
	var text, js bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	if len(lines) != len(FGDPolicies) {
		t.Fatalf("%d JSON lines, want %d:\n%s", len(lines), len(FGDPolicies), js.String())
	}
	for i, l := range lines {
		var o map[string]any
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("JSON line %d: %v", i, err)
		}
		if o["policy"] != FGDPolicies[i] || o["unallocated_gpu_pct_at_100"] == nil || o["frag_gpu_pct_at_100"] == nil {
			t.Errorf("JSON line %d = %s", i, l)
		}
		if !strings.Contains(text.String(), FGDPolicies[i]) {
			t.Errorf("table has no row for %s:\n%s", FGDPolicies[i], text.String())
		}
	}
	dir := t.TempDir()
	files, err := res.WriteCSV(dir)
	if err != nil || len(files) != len(FGDPolicies) {
		t.Fatalf("WriteCSV: %d files, %v", len(files), err)
	}
	if err := res.WritePlot(filepath.Join(dir, "fgd.png")); err != nil {
		t.Fatal(err)
	}
}

func TestParseSeeds(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []int64
		wantErr bool
	}{
		"range":   {in: "42-51", want: DefaultSeeds},
		"one":     {in: "42", want: []int64{42}},
		"list":    {in: "42,45", want: []int64{42, 45}},
		"mixed":   {in: "1-3, 7", want: []int64{1, 2, 3, 7}},
		"bad":     {in: "x", wantErr: true},
		"inverse": {in: "5-1", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSeeds(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseSeeds(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseSeeds(%q) (-want +got):\n%s", tc.in, diff)
			}
			if err == nil && FormatSeeds(got) == "" {
				t.Errorf("FormatSeeds(%v) empty", got)
			}
		})
	}
}

// A task list whose tasks need no GPU has nothing to tune: RunFGD says so
// instead of Tune adding CPU-only copies for ever, and Tune alone leaves
// the list as it is.
func TestRunFGDTasksWithoutGPUs(t *testing.T) {
	nodes := []placement.Node{{ID: "n0", Pool: OpenBPool, Schedulable: true, CPUMilli: 1000, MemMiB: 1024,
		GPUs: []placement.GPU{{Index: 0, Model: "T4", Healthy: true}}}}
	tasks := []Task{{Name: "cpu-0", CPUMilli: 100}, {Name: "cpu-1", CPUMilli: 200}}

	_, err := RunFGD(context.Background(), FGDConfig{
		Nodes: nodes, Tasks: tasks, Policies: []string{"best-fit"}, Seeds: []int64{42},
		NewScorer: baselines.ScorerByName,
	})
	const want = "fgd: none of the 2 tasks needs a GPU; the protocol tunes the tasks' GPU demand to a share of GPU capacity"
	if err == nil || err.Error() != want {
		t.Errorf("RunFGD error %v, want %q", err, want)
	}

	got := Tune(tasks, tasks, GPUCapacityMilli(nodes), DefaultTuneRatio, rand.New(rand.NewSource(42)))
	if diff := cmp.Diff(tasks, got); diff != "" {
		t.Errorf("Tune changed a CPU-only task list (-want +got):\n%s", diff)
	}
}
