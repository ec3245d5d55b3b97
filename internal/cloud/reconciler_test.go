package cloud_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/internal/testclock"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/fake"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable clock shared by the fake cloud and the reconciler.
type clock = testclock.Clock

// job is what fakeJobs answers for one job.
type job struct {
	attempt int
	running bool
	err     error
}

// fakeJobs answers Jobs from a table; jobs not in it are unknown.
type fakeJobs struct {
	mu    sync.Mutex
	jobs  map[gangway.JobID]job
	asked map[gangway.JobID]int
}

func (f *fakeJobs) Attempt(_ context.Context, id gangway.JobID) (int, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.asked == nil {
		f.asked = map[gangway.JobID]int{}
	}
	f.asked[id]++
	j, ok := f.jobs[id]
	if !ok {
		return 0, false, fmt.Errorf("job %s: %w", id, cloud.ErrUnknownJob)
	}
	return j.attempt, j.running, j.err
}

func newCloud(t *testing.T, name string, c *clock) *fake.Provider {
	t.Helper()
	p, err := fake.New(fake.Options{Name: name, Clock: c, Pools: []fake.Pool{
		{Name: "a100-spot", Zone: "z1", InstanceType: "a100x8", GPUModel: "A100", GPUs: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 12},
		{Name: "a100-od", Zone: "z1", InstanceType: "a100x8", GPUModel: "A100", GPUs: 8, CapacityType: gangway.CapacityOnDemand, PricePerHour: 32},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// launch starts count instances for one attempt of one job in pool.
func launch(t *testing.T, p *fake.Provider, pool, jobID string, attempt, count int) []string {
	t.Helper()
	ct := gangway.CapacitySpot
	if strings.HasSuffix(pool, "-od") {
		ct = gangway.CapacityOnDemand
	}
	insts, err := p.Launch(t.Context(), providers.LaunchRequest{
		Offer: gangway.Offer{Pool: pool, Zone: "z1", InstanceType: "a100x8", CapacityType: ct},
		Count: count, Token: providers.Token(jobID, attempt), JobID: jobID, Attempt: attempt,
	})
	if err != nil {
		t.Fatalf("launch %s/%d: %v", jobID, attempt, err)
	}
	ids := make([]string, len(insts))
	for i, in := range insts {
		ids[i] = in.ID
	}
	return ids
}

func liveIDs(t *testing.T, p providers.Provider) []string {
	t.Helper()
	insts, err := p.ListByTag(t.Context(), providers.TagJob, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range insts {
		ids = append(ids, in.ID)
	}
	return ids
}

// summary is what a test checks of a report: which instances went, which
// were spared, and why.
type summary struct {
	Instances, Kept int
	Terminated      []string // "provider/instance job attempt reason"
	Spared          []string
	Errors          int
}

func summarize(r cloud.Report) summary {
	s := summary{Instances: r.Instances, Kept: r.Kept, Errors: len(r.Errors)}
	line := func(o cloud.Orphan) string {
		return fmt.Sprintf("%s/%s %s %s %s", o.Provider, o.InstanceID, o.JobID, o.Attempt, o.Reason)
	}
	for _, o := range r.Terminated {
		s.Terminated = append(s.Terminated, line(o))
	}
	for _, o := range r.Spared {
		s.Spared = append(s.Spared, line(o))
	}
	return s
}

func TestReconcile(t *testing.T) {
	const grace = 10 * time.Minute
	tests := map[string]struct {
		// setup launches instances (the clock starts at t0) and returns the
		// jobs table; the pass runs at t0 + age.
		setup    func(t *testing.T, p *fake.Provider) map[gangway.JobID]job
		age      time.Duration
		want     summary
		wantLive []string
	}{
		"orphan after a crash: the job is unknown": {
			setup: func(t *testing.T, p *fake.Provider) map[gangway.JobID]job {
				launch(t, p, "a100-spot", "lost-job", 1, 2)
				return nil
			},
			age: time.Hour,
			want: summary{Instances: 2, Terminated: []string{
				"c1/fake-000001 lost-job 1 job-unknown", "c1/fake-000002 lost-job 1 job-unknown"}},
		},
		"orphan after a crash: the job finished without terminating": {
			setup: func(t *testing.T, p *fake.Provider) map[gangway.JobID]job {
				launch(t, p, "a100-od", "done-job", 3, 1)
				return map[gangway.JobID]job{"done-job": {attempt: 3, running: false}}
			},
			age:  time.Hour,
			want: summary{Instances: 1, Terminated: []string{"c1/fake-000001 done-job 3 job-closed"}},
		},
		"live job untouched": {
			setup: func(t *testing.T, p *fake.Provider) map[gangway.JobID]job {
				launch(t, p, "a100-spot", "train", 2, 2)
				return map[gangway.JobID]job{"train": {attempt: 2, running: true}}
			},
			age:      48 * time.Hour,
			want:     summary{Instances: 2, Kept: 2},
			wantLive: []string{"fake-000001", "fake-000002"},
		},
		"young instance spared": {
			setup: func(t *testing.T, p *fake.Provider) map[gangway.JobID]job {
				launch(t, p, "a100-spot", "lost-job", 1, 1)
				return nil
			},
			age:      grace - time.Second,
			want:     summary{Instances: 1, Spared: []string{"c1/fake-000001 lost-job 1 job-unknown"}},
			wantLive: []string{"fake-000001"},
		},
		"attempt moved on": {
			setup: func(t *testing.T, p *fake.Provider) map[gangway.JobID]job {
				launch(t, p, "a100-spot", "train", 1, 1)
				launch(t, p, "a100-od", "train", 2, 1)
				return map[gangway.JobID]job{"train": {attempt: 2, running: true}}
			},
			age:      time.Hour,
			want:     summary{Instances: 2, Kept: 1, Terminated: []string{"c1/fake-000001 train 1 stale-attempt"}},
			wantLive: []string{"fake-000002"},
		},
		"a launch ahead of the job's status is in flight": {
			setup: func(t *testing.T, p *fake.Provider) map[gangway.JobID]job {
				launch(t, p, "a100-spot", "train", 4, 1)
				return map[gangway.JobID]job{"train": {attempt: 3, running: true}}
			},
			age:      time.Hour,
			want:     summary{Instances: 1, Kept: 1},
			wantLive: []string{"fake-000001"},
		},
		"a job that cannot be asked about keeps its instances": {
			setup: func(t *testing.T, p *fake.Provider) map[gangway.JobID]job {
				launch(t, p, "a100-spot", "train", 1, 2)
				return map[gangway.JobID]job{"train": {err: errors.New("query timed out")}}
			},
			age:      time.Hour,
			want:     summary{Instances: 2, Kept: 2, Errors: 1},
			wantLive: []string{"fake-000001", "fake-000002"},
		},
		"mixed": {
			setup: func(t *testing.T, p *fake.Provider) map[gangway.JobID]job {
				launch(t, p, "a100-spot", "a", 1, 1)
				launch(t, p, "a100-spot", "b", 1, 1)
				launch(t, p, "a100-od", "c", 5, 1)
				return map[gangway.JobID]job{"a": {attempt: 1, running: true}, "c": {attempt: 6, running: true}}
			},
			age: time.Hour,
			want: summary{Instances: 3, Kept: 1, Terminated: []string{
				"c1/fake-000002 b 1 job-unknown", "c1/fake-000003 c 5 stale-attempt"}},
			wantLive: []string{"fake-000001"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := testclock.New(t0)
			p := newCloud(t, "c1", c)
			jobs := &fakeJobs{jobs: tc.setup(t, p)}
			c.Advance(tc.age)
			reg, err := cloud.NewRegistry([]providers.Provider{p}, cloud.RegistryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			r := cloud.NewReconciler(reg, jobs, cloud.ReconcilerConfig{Grace: grace, Now: c.Now})
			got := summarize(r.Reconcile(t.Context()))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLive, liveIDs(t, p)); diff != "" {
				t.Errorf("instances left (-want +got):\n%s", diff)
			}
			for id, n := range jobs.asked {
				if n != 1 {
					t.Errorf("job %s asked about %d times in one pass, want once", id, n)
				}
			}
			// A second pass finds nothing more to do: terminating is done.
			again := summarize(r.Reconcile(t.Context()))
			if len(again.Terminated) != 0 {
				t.Errorf("second pass terminated %v again", again.Terminated)
			}
		})
	}
}

// TestReconcileSparedThenTerminated follows one orphan through the grace
// period: spared while young, terminated once older.
func TestReconcileSparedThenTerminated(t *testing.T) {
	c := testclock.New(t0)
	p := newCloud(t, "c1", c)
	launch(t, p, "a100-spot", "gone", 1, 1)
	reg, _ := cloud.NewRegistry([]providers.Provider{p}, cloud.RegistryOptions{})
	r := cloud.NewReconciler(reg, &fakeJobs{}, cloud.ReconcilerConfig{Grace: 5 * time.Minute, Now: c.Now})

	c.Advance(time.Minute)
	if rep := r.Reconcile(t.Context()); len(rep.Spared) != 1 || len(rep.Terminated) != 0 {
		t.Fatalf("at 1m: spared %d, terminated %d; want 1, 0", len(rep.Spared), len(rep.Terminated))
	}
	c.Advance(5 * time.Minute)
	rep := r.Reconcile(t.Context())
	if len(rep.Terminated) != 1 || rep.Terminated[0].Age != 6*time.Minute {
		t.Fatalf("at 6m: terminated %+v; want the orphan, aged 6m", rep.Terminated)
	}
	if ids := liveIDs(t, p); len(ids) != 0 {
		t.Errorf("instances left: %v", ids)
	}
}

// TestReconcileProviderFailure checks that one provider failing to list
// neither stops the others nor lets nodes be swept on partial knowledge.
func TestReconcileProviderFailure(t *testing.T) {
	c := testclock.New(t0)
	good, bad := newCloud(t, "good", c), newCloud(t, "bad", c)
	launch(t, good, "a100-spot", "gone", 1, 1)
	launch(t, bad, "a100-spot", "gone", 1, 1)
	c.Advance(time.Hour)
	bad.FailNext(fake.OpList, fmt.Errorf("%w: rate exceeded", providers.ErrThrottled))
	reg, _ := cloud.NewRegistry([]providers.Provider{good, bad}, cloud.RegistryOptions{})
	nodes := &fakeNodes{nodes: []gangway.NodeStatus{cloudNode("ghost", "gone", t0)}}
	preg := prometheus.NewRegistry()
	r := cloud.NewReconciler(reg, &fakeJobs{}, cloud.ReconcilerConfig{Now: c.Now, Nodes: nodes, Metrics: metrics.NewCloud(preg)})
	got := summarize(r.Reconcile(t.Context()))
	want := summary{Instances: 1, Errors: 1, Terminated: []string{"good/fake-000001 gone 1 job-unknown"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if len(nodes.removed) != 0 {
		t.Errorf("nodes removed with a provider unlisted: %v", nodes.removed)
	}
	if n := counterSum(t, preg, "gangway_cloud_reconcile_errors_total"); n != 1 {
		t.Errorf("reconcile errors = %v, want 1", n)
	}
	// Next pass: bad answers and its orphan goes too.
	got = summarize(r.Reconcile(t.Context()))
	if diff := cmp.Diff(summary{Instances: 1, Terminated: []string{"bad/fake-000001 gone 1 job-unknown"}}, got); diff != "" {
		t.Errorf("second pass (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ghost"}, nodes.removed); diff != "" {
		t.Errorf("removed nodes (-want +got):\n%s", diff)
	}
}

func TestReconcileMetrics(t *testing.T) {
	c := testclock.New(t0)
	p := newCloud(t, "c1", c)
	launch(t, p, "a100-spot", "live", 1, 2)
	launch(t, p, "a100-od", "gone", 1, 1)
	c.Advance(time.Hour)
	reg, _ := cloud.NewRegistry([]providers.Provider{p}, cloud.RegistryOptions{})
	preg := prometheus.NewRegistry()
	r := cloud.NewReconciler(reg, &fakeJobs{jobs: map[gangway.JobID]job{"live": {attempt: 1, running: true}}},
		cloud.ReconcilerConfig{Now: c.Now, Metrics: metrics.NewCloud(preg)})
	r.Reconcile(t.Context())
	want := `
# HELP gangway_cloud_instances Gangway-tagged cloud instances not yet terminated, as the last reconcile pass listed them, by provider, pool and capacity type.
# TYPE gangway_cloud_instances gauge
gangway_cloud_instances{capacity_type="on-demand",pool="a100-od",provider="c1"} 0
gangway_cloud_instances{capacity_type="spot",pool="a100-spot",provider="c1"} 2
# HELP gangway_cloud_instances_terminated_total Cloud instances Gangway terminated, by provider, pool and reason (released, orphan).
# TYPE gangway_cloud_instances_terminated_total counter
gangway_cloud_instances_terminated_total{pool="a100-od",provider="c1",reason="orphan"} 1
# HELP gangway_cloud_orphans_terminated_total Instances the reconciler terminated because no live job owned them, by provider and why (job-closed, job-unknown, stale-attempt).
# TYPE gangway_cloud_orphans_terminated_total counter
gangway_cloud_orphans_terminated_total{provider="c1",reason="job-unknown"} 1
`
	if err := testutil.GatherAndCompare(preg, strings.NewReader(want), "gangway_cloud_instances",
		"gangway_cloud_instances_terminated_total", "gangway_cloud_orphans_terminated_total"); err != nil {
		t.Error(err)
	}
	// The next pass drops the series of the pool that emptied.
	r.Reconcile(t.Context())
	if n := testutil.CollectAndCount(preg, "gangway_cloud_instances"); n != 1 {
		t.Errorf("%d live-instance series after the orphan went, want 1", n)
	}
}

// fakeNodes is a capacity view with a fixed node list.
type fakeNodes struct {
	mu      sync.Mutex
	nodes   []gangway.NodeStatus
	removed []string
}

func (f *fakeNodes) Nodes(context.Context) ([]gangway.NodeStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.nodes), nil
}

func (f *fakeNodes) RemoveNode(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, n := range f.nodes {
		if n.Node.ID != id {
			continue
		}
		if len(n.Allocated) > 0 {
			return fmt.Errorf("remove node %s: %w", id, capacity.ErrNodeBusy)
		}
		f.nodes = slices.Delete(f.nodes, i, i+1)
		f.removed = append(f.removed, id)
		return nil
	}
	return fmt.Errorf("remove node %s: %w", id, capacity.ErrNotFound)
}

func cloudNode(id string, owner gangway.JobID, heartbeat time.Time) gangway.NodeStatus {
	return gangway.NodeStatus{Node: gangway.Node{ID: id, Pool: "a100-spot", Owner: owner, CapacityType: "spot"},
		State: gangway.NodeReady, LastHeartbeat: heartbeat}
}

func TestReconcileSweepsNodesOfGoneInstances(t *testing.T) {
	c := testclock.New(t0)
	p := newCloud(t, "c1", c)
	ids := launch(t, p, "a100-spot", "live", 1, 1)
	c.Advance(time.Hour)
	now := c.Now()
	busy := cloudNode("busy", "gone", t0)
	busy.Allocated = map[int]gangway.JobID{0: "gone"}
	nodes := &fakeNodes{nodes: []gangway.NodeStatus{
		cloudNode(ids[0], "live", t0),   // its instance is live
		cloudNode("ghost", "gone", t0),  // instance gone, silent for an hour
		cloudNode("fresh", "gone", now), // gone but heartbeating: not yet
		busy,                            // a job still holds its GPUs
		{Node: gangway.Node{ID: "onprem-1", Pool: "onprem"}, LastHeartbeat: t0}, // on-prem: never swept
	}}
	reg, _ := cloud.NewRegistry([]providers.Provider{p}, cloud.RegistryOptions{})
	r := cloud.NewReconciler(reg, &fakeJobs{jobs: map[gangway.JobID]job{"live": {attempt: 1, running: true}}},
		cloud.ReconcilerConfig{Now: c.Now, Nodes: nodes})
	rep := r.Reconcile(t.Context())
	if diff := cmp.Diff([]string{"ghost"}, rep.RemovedNodes); diff != "" {
		t.Errorf("removed nodes (-want +got):\n%s", diff)
	}
	if len(rep.Errors) != 0 {
		t.Errorf("errors: %v", rep.Errors)
	}
}

func TestRunReconcilesUntilCancelled(t *testing.T) {
	c := testclock.New(t0)
	p := newCloud(t, "c1", c)
	launch(t, p, "a100-spot", "gone", 1, 1)
	c.Advance(time.Hour)
	reg, _ := cloud.NewRegistry([]providers.Provider{p}, cloud.RegistryOptions{})
	reports := make(chan cloud.Report, 10)
	r := cloud.NewReconciler(reg, &fakeJobs{}, cloud.ReconcilerConfig{Interval: 10 * time.Millisecond, Now: c.Now,
		OnReport: func(rep cloud.Report) {
			select {
			case reports <- rep:
			default:
			}
		}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	first := <-reports
	if len(first.Terminated) != 1 {
		t.Errorf("first pass terminated %d, want 1", len(first.Terminated))
	}
	<-reports // a second pass follows on the interval
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}

// counterSum adds up every series of the counter name.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

var _ cloud.Nodes = (*capacity.View)(nil)
