package fullstack

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// intervals records when and where each task ran, from the agent's own
// start and stop events.
type intervals struct {
	mu    sync.Mutex
	runs  map[gangway.JobID][2]time.Time
	gpus  map[gangway.JobID][]int
	nodes map[gangway.JobID]string
}

func (r *intervals) Record(e agent.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run := r.runs[e.JobID]
	if e.Start {
		run[0] = e.At
		r.gpus[e.JobID], r.nodes[e.JobID] = e.GPUs, e.Node
	} else {
		run[1] = e.At
	}
	r.runs[e.JobID] = run
}

// TestSharingOnRealServers: on a node with one GPU, two jobs asking half a
// GPU each run on it at the same time, each told its share, and a third
// waits with a reason until one of them ends; a job asking for a 1g.10gb
// MIG device lands on a free device of that profile on a second node,
// whose GPU is in MIG mode (a fake inventory), and is told its UUID; none
// of the shares goes there. The ledger bills each job its share: half of
// a GPU-second per second for the halves, 142 milli-GPU for the 1g.10gb
// device. Real Temporal and redis-server, the real dispatch loop and
// agents.
func TestSharingOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	rec := &intervals{runs: map[gangway.JobID][2]time.Time{}, gpus: map[gangway.JobID][]int{}, nodes: map[gangway.JobID]string{}}
	out := t.TempDir()
	// One H100 in MIG mode: a 3g.40gb device (slot 0) and two 1g.10gb ones
	// (slots 1 and 2).
	migNode := agent.FakeShapeNode("mig", "onprem", "127.0.0.1",
		agent.NodeShape{GPUs: 1, Model: "H100", MIGGPUs: 1, MIG: []string{"3g.40gb", "1g.10gb", "1g.10gb"}})
	st, err := Start(ctx, Options{
		Dir: t.TempDir(), Headless: true,
		Nodes:  []gangway.Node{agent.FakeNode("one", "onprem", "127.0.0.1", 1, "H100"), migNode},
		Agent:  agent.Config{HeartbeatInterval: time.Second, Recorder: rec},
		Server: &ServerOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := client.New(jobs.New(st.TemporalClient), st.View)

	spec := func(name string, g gangway.Gang) gangway.JobSpec {
		// Each task writes what it was told about its share, then sleeps.
		script := `echo "$GANGWAY_GPU_MILLI $GANGWAY_GPU_SHARING $GANGWAY_MIG_PROFILE $CUDA_VISIBLE_DEVICES $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" > ` +
			filepath.Join(out, name) + `; sleep 4`
		g.Replicas, g.GPUsPerReplica = 1, 1
		return gangway.JobSpec{Name: name, Team: "ml", Command: []string{"sh", "-c", script}, Gang: g}
	}
	specs := []gangway.JobSpec{
		spec("half-a", gangway.Gang{GPUShare: "0.5"}),
		spec("half-b", gangway.Gang{GPUShare: "500m", Sharing: gangway.SharingMPS}),
		spec("half-c", gangway.Gang{GPUShare: "0.5"}),
		spec("mig-small", gangway.Gang{MIGProfile: "1g.10gb"}),
	}
	for _, s := range specs {
		if _, err := c.Submit(ctx, s, client.SubmitOptions{}); err != nil {
			t.Fatalf("submit %s: %v", s.Name, err)
		}
		time.Sleep(200 * time.Millisecond) // submit order is queue order
	}
	// While a and b run, c waits for GPU capacity, with a reason.
	var waiting *gangway.Waiting
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && waiting == nil; time.Sleep(200 * time.Millisecond) {
		a, _ := c.Status(ctx, "half-a")
		b, _ := c.Status(ctx, "half-b")
		cs, _ := c.Status(ctx, "half-c")
		if a.Phase == gangway.PhaseRunning && b.Phase == gangway.PhaseRunning && cs.Waiting != nil {
			waiting = cs.Waiting
		}
	}
	if waiting == nil {
		t.Fatal("never saw half-a and half-b running together with half-c waiting")
	}
	t.Logf("half-c waits: %s", waiting)
	for _, s := range specs {
		res, err := c.Result(ctx, s.Name)
		if err != nil || res.Phase != gangway.PhaseSucceeded {
			t.Fatalf("%s: %v %v %s", s.Name, err, res.Phase, res.Reason)
		}
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	a, b, cr := rec.runs["half-a"], rec.runs["half-b"], rec.runs["half-c"]
	if !(a[0].Before(b[1]) && b[0].Before(a[1])) {
		t.Errorf("half-a ran %v–%v and half-b %v–%v: not at the same time", a[0], a[1], b[0], b[1])
	}
	if firstEnd := a[1]; cr[0].Before(firstEnd) && cr[0].Before(b[1]) {
		t.Errorf("half-c started at %v, before either half ended (%v, %v): the GPU held more than one GPU of shares", cr[0], firstEnd, b[1])
	}
	for name, want := range map[gangway.JobID]struct {
		node string
		gpu  int
	}{"half-a": {"one", 0}, "half-b": {"one", 0}, "half-c": {"one", 0}, "mig-small": {"mig", 1}} {
		if g := rec.gpus[name]; rec.nodes[name] != want.node || len(g) != 1 || g[0] != want.gpu {
			t.Errorf("%s ran on %s GPUs %v, want %s [%d]", name, rec.nodes[name], g, want.node, want.gpu)
		}
	}
	told := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(string(b)), " ")
	}
	if got := told("half-a"); got != "500 time-slicing 0" {
		t.Errorf("half-a was told %q, want the time-sliced share of GPU 0", got)
	}
	if got := told("half-b"); got != "500 mps 0 50" {
		t.Errorf("half-b was told %q, want an MPS share of GPU 0 at 50%% of its SMs", got)
	}
	if got, want := told("mig-small"), "1g.10gb "+migNode.GPUs[1].UUID; got != want {
		t.Errorf("mig-small was told %q, want its profile and the MIG device's UUID %q", got, want)
	}

	// The ledger bills each job its share of a GPU over the time its task
	// ran (the agent's own start and stop, within a second or so of the
	// workflow's).
	for name, share := range map[gangway.JobID]float64{"half-a": 0.5, "half-b": 0.5, "half-c": 0.5, "mig-small": 0.142} {
		segs, err := st.Ledger.JobSegments(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		billed, held := 0.0, 0.0
		for _, s := range segs {
			billed += s.GPUSeconds()
			held += s.End.Sub(s.Start).Seconds()
			if want := int64(math.Round(share * 1000)); s.GPUs != 1 || s.GPUMilli != want {
				t.Errorf("%s: ledger row of %d GPUs counting %d milli-GPU, want 1 counting %d", name, s.GPUs, s.GPUMilli, want)
			}
		}
		ran := rec.runs[name][1].Sub(rec.runs[name][0]).Seconds()
		t.Logf("%s: the ledger bills %.3f GPU-seconds for %.3f s held; its task ran %.3f s (share %.3f)", name, billed, held, ran, share)
		if len(segs) == 0 || math.Abs(billed-share*held) > 1e-6 {
			t.Errorf("%s: billed %v GPU-seconds for %v s, want %v × %v", name, billed, held, share, held)
		}
		if math.Abs(billed-share*ran) > share*2 {
			t.Errorf("%s: billed %v GPU-seconds; its task ran %v s at a share of %v, %v GPU-seconds", name, billed, ran, share, share*ran)
		}
	}
}
