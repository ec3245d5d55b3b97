package fullstack

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

type startedOn struct {
	mu    sync.Mutex
	nodes map[gangway.JobID][]string
}

func (r *startedOn) Record(e agent.Event) {
	if !e.Start {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes[e.JobID] = append(r.nodes[e.JobID], e.Node)
}

// TestHostedNodes registers 2,000 simulated nodes hosted by one agent host
// beside one node with its own agent, and runs jobs on both kinds: whole-
// node jobs and a gang land on several hosted nodes through the host's
// shared task queue, and a job kept to the own node's pool runs on its own
// queue as before.
func TestHostedNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const hosted = 2000
	rec := &startedOn{nodes: map[gangway.JobID][]string{}}
	st, err := Start(ctx, Options{
		Dir: t.TempDir(), Headless: true,
		HostedNodes: agent.FakeFleet("sim", "hosted", []agent.NodeShape{{Count: hosted, GPUs: 8, Model: "H100"}}),
		Nodes:       []gangway.Node{agent.FakeNode("own", "own", "127.0.0.1", 2, "H100")},
		Agent:       agent.Config{HeartbeatInterval: time.Second, Recorder: rec},
		Server:      &ServerOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := len(st.Host.NodeIDs()); got != hosted {
		t.Fatalf("host runs %d nodes, want %d", got, hosted)
	}

	c := client.New(jobs.New(st.TemporalClient), st.View)
	spec := func(name string, replicas, gpus int, pools ...string) gangway.JobSpec {
		return gangway.JobSpec{Name: name, Team: "ml", Command: []string{"true"}, Pools: pools,
			Gang: gangway.Gang{Replicas: replicas, GPUsPerReplica: gpus}}
	}
	specs := []gangway.JobSpec{spec("gang", 2, 8), spec("on-own", 1, 2, "own")}
	for i := range 4 {
		specs = append(specs, spec(fmt.Sprintf("whole-%d", i), 1, 8, "hosted"))
	}
	for _, s := range specs {
		if _, err := c.Submit(ctx, s, client.SubmitOptions{}); err != nil {
			t.Fatalf("submit %s: %v", s.Name, err)
		}
	}
	for _, s := range specs {
		res, err := c.Result(ctx, s.Name)
		if err != nil {
			t.Fatalf("result %s: %v", s.Name, err)
		}
		if res.Phase != gangway.PhaseSucceeded {
			t.Errorf("%s ended %s: %s", s.Name, res.Phase, res.Reason)
		}
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := rec.nodes["on-own"]; len(got) != 1 || got[0] != "own" {
		t.Errorf("on-own started on %v, want [own]", got)
	}
	distinct := map[string]bool{}
	for _, s := range specs {
		if s.Name == "on-own" {
			continue
		}
		got := rec.nodes[s.Name]
		if len(got) != s.Gang.Replicas {
			t.Errorf("%s started %d members, want %d", s.Name, len(got), s.Gang.Replicas)
		}
		for _, n := range got {
			if st.Host.Node(n) == nil {
				t.Errorf("%s ran on %s, not a hosted node", s.Name, n)
			}
			distinct[n] = true
		}
	}
	// The jobs are short, so a later one may reuse a node an earlier one
	// freed; the gang's two members still need two nodes.
	if g := rec.nodes["gang"]; len(g) != 2 || g[0] == g[1] {
		t.Errorf("the gang started on %v, want two distinct hosted nodes", g)
	}
	if len(distinct) < 2 {
		t.Errorf("the jobs ran on %d distinct hosted nodes, want several", len(distinct))
	}
}
