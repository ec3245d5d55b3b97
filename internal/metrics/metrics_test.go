package metrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// histogram is what a test checks of one histogram series: how many
// observations, their sum, and the cumulative count per upper bound that
// holds at least one observation.
type histogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// histograms gathers reg and returns the series of the histogram name, keyed
// by the value of label (or "" for an unlabelled histogram); series with the
// same value are added up.
func histograms(t *testing.T, reg *prometheus.Registry, name, label string) map[string]histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]histogram{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					key = lp.GetValue()
				}
			}
			h := m.GetHistogram()
			got, ok := out[key]
			if !ok {
				got.Buckets = map[float64]uint64{}
			}
			got.Count += h.GetSampleCount()
			got.Sum += h.GetSampleSum()
			for _, b := range h.GetBucket() {
				if b.GetCumulativeCount() > 0 {
					got.Buckets[b.GetUpperBound()] += b.GetCumulativeCount()
				}
			}
			out[key] = got
		}
	}
	return out
}

func TestCycleDone(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.CycleDone(ResultCommitted, 2*time.Millisecond)
	m.CycleDone(ResultCommitted, 10*time.Millisecond)
	m.CycleDone(ResultIdle, 400*time.Microsecond)
	m.CycleDone(ResultStale, 3*time.Millisecond)
	m.CycleDone(ResultNotLeader, 100*time.Microsecond)
	m.CycleDone(ResultError, 5*time.Millisecond)

	// An idle cycle commits nothing, so it has no commit series at all.
	wantCommits := `
# HELP gangway_dispatch_commits_total Plan commits by result (committed, stale, not_leader, error).
# TYPE gangway_dispatch_commits_total counter
gangway_dispatch_commits_total{result="committed"} 2
gangway_dispatch_commits_total{result="error"} 1
gangway_dispatch_commits_total{result="not_leader"} 1
gangway_dispatch_commits_total{result="stale"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantCommits), "gangway_dispatch_commits_total"); err != nil {
		t.Error(err)
	}

	// Buckets are 0.5 ms × 2^k: 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, …
	wantCycles := map[string]histogram{
		ResultCommitted: {Count: 2, Sum: 0.012, Buckets: map[float64]uint64{0.002: 1, 0.004: 1, 0.008: 1, 0.016: 2}},
		ResultIdle:      {Count: 1, Sum: 0.0004, Buckets: map[float64]uint64{0.0005: 1, 0.001: 1, 0.002: 1, 0.004: 1, 0.008: 1, 0.016: 1}},
		ResultStale:     {Count: 1, Sum: 0.003, Buckets: map[float64]uint64{0.004: 1, 0.008: 1, 0.016: 1}},
		ResultNotLeader: {Count: 1, Sum: 0.0001, Buckets: map[float64]uint64{0.0005: 1, 0.001: 1, 0.002: 1, 0.004: 1, 0.008: 1, 0.016: 1}},
		ResultError:     {Count: 1, Sum: 0.005, Buckets: map[float64]uint64{0.008: 1, 0.016: 1}},
	}
	got := histograms(t, reg, "gangway_dispatch_cycle_duration_seconds", "result")
	// Past 16 ms every bucket holds every observation; keep the test to
	// the buckets that tell the observations apart.
	for _, h := range got {
		for ub := range h.Buckets {
			if ub > 0.016 {
				delete(h.Buckets, ub)
			}
		}
	}
	if diff := cmp.Diff(wantCycles, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("cycle duration histograms mismatch (-want +got):\n%s", diff)
	}
}

func TestJobPlaced(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Teams([]string{"nlp", "vision"})
	m.JobPlaced("nlp", "high", 50*time.Millisecond)
	m.JobPlaced("nlp", "high", time.Second)
	m.JobPlaced("nlp", "high", 90*time.Second)
	m.JobPlaced("nlp", "high", 5*time.Hour) // past the last bucket: only +Inf and the count see it
	m.JobPlaced("ml", "low", time.Second)   // a team the config did not name

	// Every configured team has a series per priority class from the
	// start; the unconfigured one from its first job.
	if n := testutil.CollectAndCount(m.queueWait); n != 2*len(PriorityClasses)+1 {
		t.Errorf("%d queue wait series, want %d", n, 2*len(PriorityClasses)+1)
	}
	if h := histograms(t, reg, "gangway_queue_wait_seconds", "team")["vision"]; h.Count != 0 {
		t.Errorf("vision has %d waits, want 0", h.Count)
	}
	got := histograms(t, reg, "gangway_queue_wait_seconds", "team")["nlp"]
	if diff := cmp.Diff(uint64(4), got.Count); diff != "" {
		t.Errorf("count mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(0.05+1+90+5*3600, got.Sum, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("sum mismatch (-want +got):\n%s", diff)
	}
	// Buckets are 0.1 s × 2^k up to 0.1 × 2^17 ≈ 3.6 h.
	for _, c := range []struct {
		le   float64
		want uint64
	}{{0.1, 1}, {0.8, 1}, {1.6, 2}, {102.4, 3}, {13107.2, 3}} {
		if diff := cmp.Diff(c.want, got.Buckets[c.le]); diff != "" {
			t.Errorf("bucket le=%g mismatch (-want +got):\n%s", c.le, diff)
		}
	}
}

func TestLeader(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	tests := []struct {
		name  string
		calls []bool
		want  float64
	}{
		{name: "never called", want: 0},
		{name: "leading", calls: []bool{true}, want: 1},
		{name: "lost the lease", calls: []bool{true, false}, want: 0},
		{name: "regained", calls: []bool{true, false, true}, want: 1},
		{name: "idempotent", calls: []bool{true, true}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m.Leader(false)
			for _, c := range tt.calls {
				m.Leader(c)
			}
			if diff := cmp.Diff(tt.want, testutil.ToFloat64(m.isLeader)); diff != "" {
				t.Errorf("gangway_dispatch_leader mismatch (-want +got):\n%s", diff)
			}
		})
	}
	m.Leader(true)
	want := `
# HELP gangway_dispatch_leader 1 while this server holds the dispatch lease.
# TYPE gangway_dispatch_leader gauge
gangway_dispatch_leader 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gangway_dispatch_leader"); err != nil {
		t.Error(err)
	}
}

const (
	gpusHeader = `
# HELP gangway_gpus GPUs by pool and state (allocated, free, unavailable).
# TYPE gangway_gpus gauge
`
	queueHeader = `
# HELP gangway_queue_depth_jobs Jobs waiting in the queue, by priority class.
# TYPE gangway_queue_depth_jobs gauge
`
	unplacedHeader = `
# HELP gangway_unplaced_jobs Jobs the last dispatch cycle left waiting, by reason.
# TYPE gangway_unplaced_jobs gauge
`
)

// fleetView is one call of Metrics.Fleet.
type fleetView struct {
	pools map[string]GPUState
	queue map[string]int
}

func TestFleet(t *testing.T) {
	twoPools := fleetView{
		pools: map[string]GPUState{
			"onprem": {Allocated: 24, Free: 7, Unavailable: 1},
			"aws":    {Allocated: 8, Free: 0, Unavailable: 0},
		},
		queue: map[string]int{"high": 2, "normal": 5},
	}
	tests := []struct {
		name      string
		calls     []fleetView
		wantGPUs  string
		wantQueue string
	}{
		{
			name:  "two pools",
			calls: []fleetView{twoPools},
			wantGPUs: gpusHeader + `
gangway_gpus{pool="aws",state="allocated"} 8
gangway_gpus{pool="aws",state="free"} 0
gangway_gpus{pool="aws",state="unavailable"} 0
gangway_gpus{pool="onprem",state="allocated"} 24
gangway_gpus{pool="onprem",state="free"} 7
gangway_gpus{pool="onprem",state="unavailable"} 1
`,
			wantQueue: queueHeader + `
gangway_queue_depth_jobs{priority_class="high"} 2
gangway_queue_depth_jobs{priority_class="low"} 0
gangway_queue_depth_jobs{priority_class="normal"} 5
`,
		},
		{
			name: "a pool and a class disappear",
			calls: []fleetView{twoPools, {
				pools: map[string]GPUState{"onprem": {Allocated: 0, Free: 32}},
				queue: map[string]int{"low": 1},
			}},
			wantGPUs: gpusHeader + `
gangway_gpus{pool="onprem",state="allocated"} 0
gangway_gpus{pool="onprem",state="free"} 32
gangway_gpus{pool="onprem",state="unavailable"} 0
`,
			wantQueue: queueHeader + `
gangway_queue_depth_jobs{priority_class="high"} 0
gangway_queue_depth_jobs{priority_class="low"} 1
gangway_queue_depth_jobs{priority_class="normal"} 0
`,
		},
		{
			name:  "everything disappears",
			calls: []fleetView{twoPools, {}},
			wantQueue: queueHeader + `
gangway_queue_depth_jobs{priority_class="high"} 0
gangway_queue_depth_jobs{priority_class="low"} 0
gangway_queue_depth_jobs{priority_class="normal"} 0
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := New(reg)
			for _, c := range tt.calls {
				m.Fleet(c.pools, c.queue)
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tt.wantGPUs), "gangway_gpus"); err != nil {
				t.Error(err)
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tt.wantQueue), "gangway_queue_depth_jobs"); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestUnplaced(t *testing.T) {
	tests := []struct {
		name  string
		calls []map[string]int
		want  string
	}{
		{
			name:  "two reasons",
			calls: []map[string]int{{"InsufficientFreeGPUs": 3, "QuotaExceeded": 1}},
			want: unplacedHeader + `
gangway_unplaced_jobs{reason="InsufficientFreeGPUs"} 3
gangway_unplaced_jobs{reason="QuotaExceeded"} 1
`,
		},
		{
			name: "a reason disappears",
			calls: []map[string]int{
				{"InsufficientFreeGPUs": 3, "QuotaExceeded": 1},
				{"InsufficientFreeGPUs": 1},
			},
			want: unplacedHeader + `
gangway_unplaced_jobs{reason="InsufficientFreeGPUs"} 1
`,
		},
		{
			name:  "everything placed",
			calls: []map[string]int{{"InsufficientFreeGPUs": 3}, nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := New(reg)
			for _, c := range tt.calls {
				m.Unplaced(c)
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tt.want), "gangway_unplaced_jobs"); err != nil {
				t.Error(err)
			}
		})
	}
}

// exercise calls every helper so that every collector, vectors included,
// has at least one series.
func exercise(m *Metrics) {
	m.CycleDone(ResultCommitted, time.Millisecond)
	m.CycleDone(ResultIdle, time.Millisecond)
	m.JobPlaced("nlp", "normal", time.Second)
	m.Leader(true)
	m.Allocated(map[PoolTeam]float64{{"onprem", "nlp"}: 8}, map[PoolState]int{{"onprem", "ready"}: 4})
	m.TeamBudget("nlp", 1000, 120)
	m.Fleet(map[string]GPUState{"onprem": {Allocated: 8, Free: 24}}, map[string]int{"normal": 1})
	m.Unplaced(map[string]int{"InsufficientFreeGPUs": 1})
	m.Fragmentation(0.25, map[string]int{"nvlink": 6, "node": 6})
}

func TestLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	exercise(m)
	collectors := map[string]prometheus.Collector{
		"queueDepth":    m.queueDepth,
		"queueWait":     m.queueWait,
		"cycleDuration": m.cycleDuration,
		"commits":       m.commits,
		"gpus":          m.gpus,
		"unplaced":      m.unplaced,
		"isLeader":      m.isLeader,
		"fragRate":      m.fragRate,
		"largestFree":   m.largestFree,
		"teamGPUs":      m.teamGPUs,
		"nodes":         m.nodes,
		"budget":        m.budget,
		"spend":         m.spend,
	}
	for name, c := range collectors {
		if n := testutil.CollectAndCount(c); n == 0 {
			t.Errorf("%s: no series to lint; exercise() should give it one", name)
		}
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Errorf("%s: lint: %v", name, err)
		}
		if len(problems) > 0 {
			t.Errorf("%s: promlint problems: %+v", name, problems)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatalf("lint registry: %v", err)
	}
	if len(problems) > 0 {
		t.Errorf("registry: promlint problems: %+v", problems)
	}
}

// TestNames pins the exported metric names: dashboards and alerts use them.
func TestNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	exercise(New(reg))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var got []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
	}
	slices.Sort(got)
	want := []string{
		"gangway_defrag_lost_gpu_seconds_total",
		"gangway_defrag_moves_total",
		"gangway_dispatch_commits_total",
		"gangway_dispatch_cycle_duration_seconds",
		"gangway_dispatch_leader",
		"gangway_fragmentation_ratio",
		"gangway_gpus",
		"gangway_gpus_allocated",
		"gangway_largest_free_block_gpus",
		"gangway_nodes",
		"gangway_queue_depth_jobs",
		"gangway_queue_wait_seconds",
		"gangway_team_budget_dollars",
		"gangway_team_cloud_spend_dollars",
		"gangway_unplaced_jobs",
		"gangway_view_rebuilds_total",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metric names mismatch (-want +got):\n%s", diff)
	}
}

func TestAllocated(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Allocated(map[PoolTeam]float64{{"onprem", "nlp"}: 8, {"aws-spot", "vision"}: 0.5},
		map[PoolState]int{{"onprem", "ready"}: 3, {"onprem", "lost"}: 1, {"aws-spot", "ready"}: 1})
	// The next cycle: vision's job ended and the lost node came back.
	m.Allocated(map[PoolTeam]float64{{"onprem", "nlp"}: 8},
		map[PoolState]int{{"onprem", "ready"}: 4, {"aws-spot", "ready"}: 1})
	want := `
# HELP gangway_gpus_allocated GPUs held by running jobs, by pool and team (a shared GPU counts by its share).
# TYPE gangway_gpus_allocated gauge
gangway_gpus_allocated{pool="onprem",team="nlp"} 8
# HELP gangway_nodes Registered nodes by pool and state (ready, cordoned, lost, stale: ready but its heartbeat is older than the node TTL).
# TYPE gangway_nodes gauge
gangway_nodes{pool="aws-spot",state="cordoned"} 0
gangway_nodes{pool="aws-spot",state="lost"} 0
gangway_nodes{pool="aws-spot",state="ready"} 1
gangway_nodes{pool="aws-spot",state="stale"} 0
gangway_nodes{pool="onprem",state="cordoned"} 0
gangway_nodes{pool="onprem",state="lost"} 0
gangway_nodes{pool="onprem",state="ready"} 4
gangway_nodes{pool="onprem",state="stale"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gangway_gpus_allocated", "gangway_nodes"); err != nil {
		t.Error(err)
	}
}

func TestUnplacedKnownReasons(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Reasons([]string{"InsufficientFreeGPUs", "QuotaExceeded"})
	m.Unplaced(map[string]int{"QuotaExceeded": 2})
	want := unplacedHeader + `
gangway_unplaced_jobs{reason="InsufficientFreeGPUs"} 0
gangway_unplaced_jobs{reason="QuotaExceeded"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gangway_unplaced_jobs"); err != nil {
		t.Error(err)
	}
}
