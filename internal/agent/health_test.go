package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
	"github.com/gangwayhq/gangway/internal/gpuinfo/gpuinfotest"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/workflows"
)

// stopCall is one StopTasks the agent made.
type stopCall struct {
	GPUs    []int
	ErrType string
	Reason  string
}

// stops records StopTasks calls in place of the task runner.
type stops struct {
	mu    sync.Mutex
	calls []stopCall
}

func (s *stops) stop(gpus []int, errType, reason string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, stopCall{append([]int(nil), gpus...), errType, reason})
	return 1
}

func (s *stops) all() []stopCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]stopCall(nil), s.calls...)
}

// waitStops waits until n StopTasks calls were made.
func (s *stops) wait(t *testing.T, n int) []stopCall {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c := s.all(); len(c) >= n {
			return c
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%d StopTasks calls, want %d: %+v", len(s.all()), n, s.all())
	return nil
}

// track makes the agent believe RunTask runs t.
func track(a *Agent, t gpuTask) {
	a.gpu.mu.Lock()
	defer a.gpu.mu.Unlock()
	a.gpu.init()
	a.gpu.tasks[t.key()] = t
}

var viewSeq atomic.Int64

// gpuView is a Redis view under a fresh prefix on a real redis-server.
func gpuView(t *testing.T, rdb *redis.Client) *capacity.View {
	return capacity.New(rdb, capacity.Options{Prefix: fmt.Sprintf("{agent-gpu-%d}", viewSeq.Add(1))})
}

func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	r := devstacktest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// nvmlAgent is an agent whose GPUs are the DGX H100 NVML mock, reading
// faults through gpuinfo.NVML, with the real Redis view and StopTasks
// recorded.
type nvmlAgent struct {
	a     *Agent
	mock  *gpuinfotest.Node
	view  *capacity.View
	stops *stops
	reg   *prometheus.Registry
}

func newNVMLAgent(t *testing.T, rdb *redis.Client) *nvmlAgent {
	t.Helper()
	mock := gpuinfotest.NewDGXH100()
	src, err := gpuinfo.Open(mock, gpuinfo.Options{PollInterval: 10 * time.Millisecond, EventWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := src.Inventory("n1")
	if err != nil {
		t.Fatal(err)
	}
	view := gpuView(t, rdb)
	reg := prometheus.NewRegistry()
	h := &nvmlAgent{mock: mock, view: view, stops: &stops{}, reg: reg}
	h.a = New(Config{Node: inv.Node("n1", "onprem", "10.0.0.1", 224000, 2<<20), DataDir: t.TempDir(),
		GPU: GPUConfig{Source: src, Metrics: metrics.NewGPU(reg), SampleInterval: time.Hour}}, view)
	h.a.gpu.stop = h.stops.stop
	ctx := t.Context()
	lifted := h.a.restoreGPUHealth(ctx)
	if err := view.RegisterNode(ctx, h.a.nodeView()); err != nil {
		t.Fatal(err)
	}
	stop := h.a.startGPUWatch(ctx, nil, lifted)
	t.Cleanup(stop)
	return h
}

// healthy is the view's healthy flag per GPU of n1.
func (h *nvmlAgent) healthy(t *testing.T) []bool {
	t.Helper()
	nodes, err := h.view.Nodes(t.Context())
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes %v: %v", nodes, err)
	}
	var out []bool
	for _, g := range nodes[0].Node.GPUs {
		out = append(out, g.Healthy)
	}
	return out
}

// TestGPUFaultsOnNVMLMock: Xid 79 and a double-bit ECC error on GPUs
// running a gang member fence them in the Redis view and stop their tasks
// as GPU faults; Xid 13 fails only the job on its GPU and leaves the GPU in
// service.
func TestGPUFaultsOnNVMLMock(t *testing.T) {
	h := newNVMLAgent(t, startRedis(t))
	ctx := t.Context()
	track(h.a, gpuTask{JobID: "gang", Attempt: 1, Rank: 0, WorldSize: 2, GPUs: []int{0, 1, 2, 3}, Team: "nlp"})
	track(h.a, gpuTask{JobID: "gang", Attempt: 1, Rank: 1, WorldSize: 2, GPUs: []int{4, 6, 7}, Team: "nlp"})

	h.mock.Xid(2, 79)
	calls := h.stops.wait(t, 1)
	uuid2 := h.a.cfg.Node.GPUs[2].UUID
	want := stopCall{[]int{2}, workflows.ErrTypeGPUFault, "Xid 79 on GPU 2 (" + uuid2 + "): GPU has fallen off the bus"}
	if diff := cmp.Diff(want, calls[0]); diff != "" {
		t.Errorf("StopTasks (-want +got):\n%s", diff)
	}
	h.mock.DoubleBitECC(6)
	calls = h.stops.wait(t, 2)
	if c := calls[1]; !cmp.Equal(c.GPUs, []int{6}) || c.ErrType != workflows.ErrTypeGPUFault || !strings.Contains(c.Reason, "double-bit ECC") {
		t.Errorf("StopTasks after a double-bit ECC error: %+v", c)
	}
	if got, want := h.healthy(t), []bool{true, true, false, true, true, true, false, true}; !cmp.Equal(got, want) {
		t.Errorf("healthy in the view %v, want %v", got, want)
	}

	// An application Xid on a job's GPU: its task fails, the GPU stays.
	track(h.a, gpuTask{JobID: "bad-kernel", Attempt: 1, WorldSize: 1, GPUs: []int{5}, Team: "vision"})
	h.mock.Xid(5, 13)
	calls = h.stops.wait(t, 3)
	if c := calls[2]; !cmp.Equal(c.GPUs, []int{5}) || c.ErrType != workflows.ErrTypeTaskFailed || !strings.HasPrefix(c.Reason, "Xid 13 on GPU 5") {
		t.Errorf("StopTasks after Xid 13: %+v", c)
	}
	time.Sleep(50 * time.Millisecond) // the event lands after StopTasks
	if got := h.healthy(t); !got[5] {
		t.Error("GPU 5 fenced after an application Xid")
	}

	recs, err := h.view.GPUHealth(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if r := recs[2]; r.Healthy || r.Fences != 1 || r.LastFault == nil || r.LastFault.Xid != 79 || !cmp.Equal(r.LastFault.Jobs, []gangway.JobID{"gang"}) {
		t.Errorf("GPU 2's record: %+v", r)
	}
	if r := recs[5]; !r.Healthy || r.Fences != 0 || r.LastFault == nil || r.LastFault.Xid != 13 || r.LastFault.Blame != "app" {
		t.Errorf("GPU 5's record: %+v", r)
	}
	// The agent refuses new work on a fenced GPU even if it is sent some.
	if err := h.a.claim([]int{2}, 0, "late/attempt-1/rank-0"); err == nil || !strings.Contains(err.Error(), "fenced") {
		t.Errorf("claim on a fenced GPU: %v", err)
	}
	// A re-registration (after Redis lost the node) keeps the fences.
	if n := h.a.nodeView(); n.GPUs[2].Healthy || n.GPUs[6].Healthy || !n.GPUs[5].Healthy || n.GPUs[2].Flakiness != 1 {
		t.Errorf("node as the agent re-registers it: %+v", n.GPUs)
	}

	xids := `
# HELP gangway_gpu_xid_errors_total Xid errors the GPU reported, by Xid code.
# TYPE gangway_gpu_xid_errors_total counter
gangway_gpu_xid_errors_total{gpu="2",model="H100",node="n1",pool="onprem",team="nlp",uuid="` + uuid2 + `",xid="79"} 1
gangway_gpu_xid_errors_total{gpu="5",model="H100",node="n1",pool="onprem",team="vision",uuid="` + h.a.cfg.Node.GPUs[5].UUID + `",xid="13"} 1
`
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(xids), "gangway_gpu_xid_errors_total"); err != nil {
		t.Error(err)
	}
}

// TestGPUFenceAcrossRestarts: a fence set since the machine booted holds
// when the agent starts again; one from before the last boot is lifted.
func TestGPUFenceAcrossRestarts(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	view := gpuView(t, rdb)
	node := FakeNode("n1", "onprem", "127.0.0.1", 4, "H100")
	if err := view.RegisterNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	boot := time.Date(2025, 6, 1, 8, 0, 0, 0, time.UTC)
	for _, f := range []struct {
		gpu int
		at  time.Time
	}{{1, boot.Add(-time.Hour)}, {2, boot.Add(time.Hour)}} {
		if _, err := view.FenceGPUs(ctx, gangway.GPUEvent{Node: "n1", GPUs: []int{f.gpu}, Kind: "xid", Xid: 79,
			Meaning: "GPU has fallen off the bus", Blame: "gpu", At: f.at}); err != nil {
			t.Fatal(err)
		}
	}

	a := New(Config{Node: node, GPU: GPUConfig{Source: gpuinfo.NewSynthetic(node.GPUs), BootTime: boot,
		Now: func() time.Time { return boot.Add(2 * time.Hour) }}}, view)
	lifted := a.restoreGPUHealth(ctx)
	if !cmp.Equal(lifted, []int{1}) {
		t.Errorf("lifted %v, want GPU 1 (fenced before the boot)", lifted)
	}
	if err := view.RegisterNode(ctx, a.nodeView()); err != nil {
		t.Fatal(err)
	}
	a.startGPUWatch(ctx, nil, lifted)()
	nodes, err := view.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var healthy []bool
	for _, g := range nodes[0].Node.GPUs {
		healthy = append(healthy, g.Healthy)
	}
	if want := []bool{true, true, false, true}; !cmp.Equal(healthy, want) {
		t.Errorf("healthy after the restart %v, want %v", healthy, want)
	}
	if g := nodes[0].Node.GPUs[1]; g.Flakiness == 0 {
		t.Error("GPU 1 lost its flakiness when its fence was lifted")
	}
	recs, err := view.GPUHealth(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if !recs[1].Healthy || recs[2].Healthy {
		t.Errorf("records: GPU 1 healthy %v (want true), GPU 2 healthy %v (want false)", recs[1].Healthy, recs[2].Healthy)
	}
}

// flakyView is a GPU health view that refuses while down.
type flakyView struct {
	GPUHealthView
	down   atomic.Bool
	fenced atomic.Int32
}

func (v *flakyView) FenceGPUs(ctx context.Context, e gangway.GPUEvent) ([]gangway.GPUHealth, error) {
	if v.down.Load() {
		return nil, fmt.Errorf("redis: connection refused")
	}
	v.fenced.Add(1)
	return []gangway.GPUHealth{{Node: e.Node, GPU: e.GPUs[0], Healthy: false, Fences: 1, Score: 1, ScoreAt: e.At}}, nil
}

// TestGPUFenceRetried: a fence the view could not take is retried on the
// next sample; the GPU is out of service in the agent meanwhile.
func TestGPUFenceRetried(t *testing.T) {
	node := FakeNode("n1", "onprem", "127.0.0.1", 2, "H100")
	src := gpuinfo.NewSynthetic(node.GPUs)
	view := &flakyView{}
	view.down.Store(true)
	st := &stops{}
	a := New(Config{Node: node, GPU: GPUConfig{Source: src, View: view}}, &fakeCapacity{})
	a.gpu.stop = st.stop
	a.handleFault(t.Context(), gpuinfo.Fault{Device: 1, Slots: []int{1}, Kind: gpuinfo.KindXid, Xid: 48, Meaning: "double-bit ECC error", Blame: gpuinfo.BlameGPU})
	if a.fencedReason(1) == "" || view.fenced.Load() != 0 || len(st.all()) != 1 {
		t.Fatalf("fenced in the agent %q, in the view %d times, %d stops", a.fencedReason(1), view.fenced.Load(), len(st.all()))
	}
	view.down.Store(false)
	a.gpuTick(t.Context(), nil)
	if view.fenced.Load() != 1 {
		t.Errorf("fence reached the view %d times after it came back, want 1", view.fenced.Load())
	}
	a.gpuTick(t.Context(), nil)
	if view.fenced.Load() != 1 {
		t.Errorf("fence sent again: %d", view.fenced.Load())
	}
}

// TestGPUFaultsSynthetic: fake GPUs never fault on their own, and a test
// can make them.
func TestGPUFaultsSynthetic(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	view := gpuView(t, rdb)
	node := FakeNode("n1", "onprem", "127.0.0.1", 8, "H100")
	src := gpuinfo.NewSynthetic(node.GPUs)
	st := &stops{}
	a := New(Config{Node: node, GPU: GPUConfig{Source: src, SampleInterval: 5 * time.Millisecond}}, view)
	a.gpu.stop = st.stop
	if err := view.RegisterNode(ctx, a.nodeView()); err != nil {
		t.Fatal(err)
	}
	defer a.startGPUWatch(ctx, nil, nil)()
	time.Sleep(50 * time.Millisecond)
	if c := st.all(); len(c) != 0 {
		t.Fatalf("synthetic GPUs faulted on their own: %+v", c)
	}
	src.InjectXid(3, 79)
	if c := st.wait(t, 1); c[0].ErrType != workflows.ErrTypeGPUFault || !cmp.Equal(c[0].GPUs, []int{3}) {
		t.Errorf("StopTasks %+v", c[0])
	}
}

func TestFmt(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Hour: "1h0m", 30 * time.Minute: "30m", 45 * time.Second: "45s", 90 * time.Second: "1m30s"} {
		if got := fmtDuration(d); got != want {
			t.Errorf("fmtDuration(%v) = %q, want %q", d, got, want)
		}
	}
	if got := fmtRatio(0.05); got != "5%" {
		t.Errorf("fmtRatio(0.05) = %q", got)
	}
}
