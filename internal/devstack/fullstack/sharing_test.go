package fullstack

import (
	"context"
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

// intervals records when each task ran, from the agent's own start and
// stop events.
type intervals struct {
	mu   sync.Mutex
	runs map[gangway.JobID][2]time.Time
	gpus map[gangway.JobID][]int
}

func (r *intervals) Record(e agent.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run := r.runs[e.JobID]
	if e.Start {
		run[0] = e.At
		r.gpus[e.JobID] = e.GPUs
	} else {
		run[1] = e.At
	}
	r.runs[e.JobID] = run
}

// TestSharingOnRealServers: on a node with one GPU, two jobs asking half a
// GPU each run on it at the same time, each told its share, and a third
// waits with a reason until one of them ends; a whole-GPU job waits for
// both. Real Temporal and redis-server, the real dispatch loop and agent.
func TestSharingOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	rec := &intervals{runs: map[gangway.JobID][2]time.Time{}, gpus: map[gangway.JobID][]int{}}
	out := t.TempDir()
	st, err := Start(ctx, Options{
		Dir: t.TempDir(), Headless: true,
		Nodes:  []gangway.Node{agent.FakeNode("one", "onprem", "127.0.0.1", 1, "H100")},
		Agent:  agent.Config{HeartbeatInterval: time.Second, Recorder: rec},
		Server: &ServerOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := client.New(jobs.New(st.TemporalClient), st.View)

	spec := func(name, share string, sharing gangway.Sharing) gangway.JobSpec {
		// Each task writes what it was told about its share, then sleeps.
		script := `echo "$GANGWAY_GPU_MILLI $GANGWAY_GPU_SHARING $CUDA_VISIBLE_DEVICES $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" > ` +
			filepath.Join(out, name) + `; sleep 4`
		return gangway.JobSpec{Name: name, Team: "ml", Command: []string{"sh", "-c", script},
			Gang: gangway.Gang{Replicas: 1, GPUsPerReplica: 1, GPUShare: share, Sharing: sharing}}
	}
	specs := []gangway.JobSpec{spec("half-a", "0.5", ""), spec("half-b", "500m", gangway.SharingMPS), spec("half-c", "0.5", "")}
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
	for _, name := range []gangway.JobID{"half-a", "half-b", "half-c"} {
		if g := rec.gpus[name]; len(g) != 1 || g[0] != 0 {
			t.Errorf("%s ran on GPUs %v, want [0]", name, g)
		}
	}
	told := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := told("half-a"); got != "500 time-slicing 0" {
		t.Errorf("half-a was told %q, want the time-sliced share of GPU 0", got)
	}
	if got := told("half-b"); got != "500 mps 0 50" {
		t.Errorf("half-b was told %q, want an MPS share of GPU 0 at 50%% of its SMs", got)
	}
}
