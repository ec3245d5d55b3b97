package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/internal/testclock"
	"github.com/gangwayhq/gangway/workflows"
)

// clock is a fake clock the test moves.
type clock = testclock.Clock

// procs is a fake process table: whose each PID is, and what was killed.
type procs struct {
	mu     sync.Mutex
	owner  map[int]ProcessOwner
	killed []int
}

func (p *procs) Owner(pid int) (ProcessOwner, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, ok := p.owner[pid]
	if !ok {
		return OwnerGone, nil
	}
	return o, nil
}

func (p *procs) Kill(pid int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killed = append(p.killed, pid)
	p.owner[pid] = OwnerGone
	return nil
}

func (p *procs) kills() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.killed...)
}

// events is a GPU health view that keeps what it is told.
type eventLog struct {
	GPUHealthView
	mu     sync.Mutex
	events []gangway.GPUEvent
}

func (l *eventLog) RecordGPUEvent(_ context.Context, e gangway.GPUEvent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	return nil
}

func (l *eventLog) kinds() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var k []string
	for _, e := range l.events {
		k = append(k, e.Kind)
	}
	return k
}

// reclaimer is an agent on 4 synthetic GPUs with a fake clock, process
// table, view and StopTasks; tick runs one sample period.
type reclaimer struct {
	a     *Agent
	src   *gpuinfo.Synthetic
	clock *clock
	procs *procs
	log   *eventLog
	stops *stops
	reg   *prometheus.Registry
	alive map[gangway.JobID]error // nil: alive; errGone: gone; else: cannot tell
}

var errGone = errors.New("gone")

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newReclaimer(t *testing.T) *reclaimer {
	node := FakeNode("n1", "onprem", "127.0.0.1", 4, "H100")
	r := &reclaimer{src: gpuinfo.NewSynthetic(node.GPUs), clock: testclock.New(t0), procs: &procs{owner: map[int]ProcessOwner{}},
		log: &eventLog{}, stops: &stops{}, reg: prometheus.NewRegistry(), alive: map[gangway.JobID]error{}}
	r.a = New(Config{Node: node, GPU: GPUConfig{Source: r.src, View: r.log, Processes: r.procs, Now: r.clock.Now,
		Metrics: metrics.NewGPU(r.reg), ZombieGrace: 5 * time.Minute, IdleReport: 30 * time.Minute}}, &fakeCapacity{})
	r.a.gpu.stop = r.stops.stop
	return r
}

func (r *reclaimer) tick(t *testing.T, after time.Duration) {
	t.Helper()
	r.clock.Advance(after)
	r.a.gpuTick(t.Context(), func(_ context.Context, job gangway.JobID, _ int) (bool, error) {
		switch err := r.alive[job]; err {
		case nil:
			return true, nil
		case errGone:
			return false, nil
		default:
			return false, err
		}
	})
}

func TestZombieReclaim(t *testing.T) {
	r := newReclaimer(t)
	r.procs.owner[4242] = OwnerOther // left behind by a task that ended
	r.procs.owner[777] = OwnerOther  // gone before its grace ran out
	r.procs.owner[100] = OwnerTask   // a running task's process
	r.src.SetProcesses(1, 4242, 100)
	r.src.SetProcesses(2, 777)

	r.tick(t, 0)
	r.tick(t, 4*time.Minute)
	if k := r.procs.kills(); len(k) != 0 {
		t.Fatalf("killed %v within the grace period", k)
	}
	r.src.SetProcesses(2) // 777 exits on its own
	r.tick(t, time.Minute)
	if k := r.procs.kills(); !cmp.Equal(k, []int{4242}) {
		t.Errorf("killed %v after the grace period, want [4242]", k)
	}
	r.src.SetProcesses(2, 777) // a new process with that PID starts its own grace
	r.tick(t, time.Minute)
	r.tick(t, time.Minute)
	if k := r.procs.kills(); !cmp.Equal(k, []int{4242}) {
		t.Errorf("killed %v, want only 4242 (777 came back and starts its grace over)", k)
	}
	if k := r.log.kinds(); !cmp.Equal(k, []string{EventZombieKilled}) {
		t.Errorf("events %v", k)
	}
	if e := r.log.events[0]; !cmp.Equal(e.GPUs, []int{1}) || !cmp.Equal(e.PIDs, []int{4242}) ||
		e.Meaning != "process 4242 held GPU 1 for 5m without a task; killed" {
		t.Errorf("event %+v", e)
	}
	if got := testutil.ToFloat64(metricVec(t, r.reg, "gangway_gpu_reclaims_total", "kind", "zombie")); got != 1 {
		t.Errorf("zombie reclaims metric %v, want 1", got)
	}
}

// metricVec gathers one series' value from reg.
func metricVec(t *testing.T, reg *prometheus.Registry, name, label, value string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
					g.Set(m.GetCounter().GetValue() + m.GetGauge().GetValue())
					return g
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return nil
}

func TestOrphanReclaim(t *testing.T) {
	r := newReclaimer(t)
	track(r.a, gpuTask{JobID: "gone", Attempt: 2, WorldSize: 1, GPUs: []int{0, 1}, Team: "nlp"})
	track(r.a, gpuTask{JobID: "live", Attempt: 1, WorldSize: 1, GPUs: []int{2}, Team: "nlp"})
	track(r.a, gpuTask{JobID: "unknown", Attempt: 1, WorldSize: 1, GPUs: []int{3}, Team: "nlp"})
	r.alive["gone"] = errGone
	r.alive["unknown"] = errors.New("temporal: unavailable")

	r.tick(t, 0)
	r.tick(t, 4*time.Minute)
	if c := r.stops.all(); len(c) != 0 {
		t.Fatalf("stopped %+v within the grace period", c)
	}
	r.tick(t, time.Minute)
	want := []stopCall{{[]int{0, 1}, workflows.ErrTypeTaskFailed,
		"the workflow of gone/attempt-2 is gone; its task held GPU 0,1 for 5m after and was stopped"}}
	if diff := cmp.Diff(want, r.stops.all()); diff != "" {
		t.Errorf("StopTasks (-want +got):\n%s", diff)
	}
	r.tick(t, time.Minute)
	if c := r.stops.all(); len(c) != 1 {
		t.Errorf("stopped again: %+v", c)
	}
	if k := r.log.kinds(); !cmp.Equal(k, []string{EventOrphanKilled}) {
		t.Errorf("events %v", k)
	}
}

func TestOrphanComesBack(t *testing.T) {
	r := newReclaimer(t)
	track(r.a, gpuTask{JobID: "blip", Attempt: 1, WorldSize: 1, GPUs: []int{0}})
	r.alive["blip"] = errGone
	r.tick(t, 0)
	r.tick(t, 3*time.Minute)
	delete(r.alive, "blip") // Temporal answered "not found" in error; now it finds it
	r.tick(t, 3*time.Minute)
	r.alive["blip"] = errGone
	r.tick(t, 3*time.Minute)
	if c := r.stops.all(); len(c) != 0 {
		t.Errorf("stopped %+v: the workflow came back, its grace starts over", c)
	}
}

func TestIdleReclaim(t *testing.T) {
	r := newReclaimer(t)
	hour := gangway.Idle{After: gangway.Duration{Duration: time.Hour}, Action: gangway.IdleCheckpointAndRelease, Threshold: 0.05}
	track(r.a, gpuTask{JobID: "notebook", Attempt: 1, WorldSize: 1, GPUs: []int{1}, Team: "vision", Idle: hour})
	track(r.a, gpuTask{JobID: "train", Attempt: 1, WorldSize: 1, GPUs: []int{2}, Team: "nlp"})                       // no policy
	track(r.a, gpuTask{JobID: "spread", Attempt: 1, Rank: 0, WorldSize: 2, GPUs: []int{3}, Team: "nlp", Idle: hour}) // rank 1 elsewhere
	for _, g := range []int{1, 2, 3} {
		r.src.SetUtilization(g, 0.01)
	}
	r.src.SetUtilization(0, 0.9)

	r.tick(t, 0)
	r.tick(t, 30*time.Minute)
	// A burst of work resets the notebook's idle time.
	r.src.SetUtilization(1, 0.5)
	r.tick(t, 10*time.Minute)
	r.src.SetUtilization(1, 0.02)
	r.tick(t, time.Minute)
	r.tick(t, 59*time.Minute)
	if c := r.stops.all(); len(c) != 0 {
		t.Fatalf("stopped %+v before an hour of uninterrupted idleness", c)
	}
	idle := `
# HELP gangway_gpu_idle_seconds How long the job on the GPU has kept it below its idle threshold (0 when busy or free).
# TYPE gangway_gpu_idle_seconds gauge
gangway_gpu_idle_seconds{gpu="0",model="H100",node="n1",pool="onprem",team="",uuid="GPU-fake-n1-0"} 0
gangway_gpu_idle_seconds{gpu="1",model="H100",node="n1",pool="onprem",team="vision",uuid="GPU-fake-n1-1"} 3540
gangway_gpu_idle_seconds{gpu="2",model="H100",node="n1",pool="onprem",team="nlp",uuid="GPU-fake-n1-2"} 6000
gangway_gpu_idle_seconds{gpu="3",model="H100",node="n1",pool="onprem",team="nlp",uuid="GPU-fake-n1-3"} 6000
`
	if err := testutil.GatherAndCompare(r.reg, strings.NewReader(idle), "gangway_gpu_idle_seconds"); err != nil {
		t.Error(err)
	}
	r.tick(t, time.Minute)
	want := []stopCall{{[]int{1}, workflows.ErrTypeIdle, "idle for 1h0m below 5% GPU utilization; GPUs released"}}
	if diff := cmp.Diff(want, r.stops.all()); diff != "" {
		t.Errorf("StopTasks (-want +got):\n%s", diff)
	}
	r.tick(t, time.Hour)
	if c := r.stops.all(); len(c) != 1 {
		t.Errorf("stopped %+v: only the notebook may be (train has no policy, spread runs on another node too)", c)
	}
	if k := r.log.kinds(); !cmp.Equal(k, []string{EventIdleReleased}) {
		t.Errorf("events %v", k)
	}
}

func TestIdleNeedsUtilization(t *testing.T) {
	r := newReclaimer(t)
	track(r.a, gpuTask{JobID: "notebook", Attempt: 1, WorldSize: 1, GPUs: []int{0},
		Idle: gangway.Idle{After: gangway.Duration{Duration: time.Minute}, Threshold: 0.05}})
	// Synthetic GPUs report no utilization unless told: never idle.
	for range 5 {
		r.tick(t, time.Hour)
	}
	if c := r.stops.all(); len(c) != 0 {
		t.Errorf("stopped %+v on GPUs whose utilization is unknown", c)
	}
}
