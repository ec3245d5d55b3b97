package placement_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

var update = flag.Bool("update", false, "rewrite the golden plans in testdata/scenarios")

// A scenario file is a fleet, what runs on it, a queue and options, written
// compactly: node groups with a count, durations as strings, times relative
// to the snapshot. TestScenarios places it and compares the plan with the
// file's .golden.json twin.
type scenario struct {
	Description string            `json:"description"`
	Now         time.Time         `json:"now"` // default t0
	Nodes       []scenarioNodes   `json:"nodes"`
	Running     []scenarioRunning `json:"running"`
	Queue       []scenarioJob     `json:"queue"`
	Options     scenarioOptions   `json:"options"`
}

// scenarioNodes is one node, or Count nodes "<id>-1".."<id>-<count>".
type scenarioNodes struct {
	ID    string `json:"id"`
	Count int    `json:"count"`
	GPUs  int    `json:"gpus"`
	Model string `json:"model"`
	// Domain is the NVLink domain of all the node's GPUs: "node" for one
	// per node, "rack" for one per rack (rack-scale), or a name.
	Domain    string `json:"domain"`
	Rack      string `json:"rack"`
	Block     string `json:"block"`
	Pool      string `json:"pool"`
	CPUMilli  int64  `json:"cpuMilli"`
	MemMiB    int64  `json:"memMiB"`
	Used      []int  `json:"used"` // by work placement does not see
	Unhealthy []int  `json:"unhealthy"`
	Cordoned  bool   `json:"cordoned"`
}

type scenarioRunning struct {
	ID          string `json:"id"`
	Team        string `json:"team"`
	Priority    int    `json:"priority"`
	Preemptible bool   `json:"preemptible"`
	Ago         string `json:"startedAgo"`    // default 1h
	Checkpoint  string `json:"checkpointAgo"` // default none
	MaxRuntime  string `json:"maxRuntime"`
	Milli       int    `json:"milli"`
	CPUMilli    int64  `json:"cpuMilli"`
	MemMiB      int64  `json:"memMiB"`
	Members     []struct {
		Node string `json:"node"`
		GPUs []int  `json:"gpus"`
	} `json:"members"`
}

// scenarioJob is one job, or Count jobs "<id>-1".."<id>-<count>".
type scenarioJob struct {
	ID          string   `json:"id"`
	Count       int      `json:"count"`
	Team        string   `json:"team"`
	Priority    int      `json:"priority"`
	Age         string   `json:"age"`
	Replicas    int      `json:"replicas"`
	GPUs        int      `json:"gpus"` // per replica; 0 with cpuOnly
	Milli       int      `json:"milli"`
	CPUOnly     bool     `json:"cpuOnly"`
	CPUMilli    int64    `json:"cpuMilli"`
	MemMiB      int64    `json:"memMiB"`
	Models      []string `json:"models"`
	Pools       []string `json:"pools"`
	Topology    string   `json:"topology"` // nvlink, node, rack, block
	Required    bool     `json:"required"`
	Runtime     string   `json:"runtime"`
	Preemptible bool     `json:"preemptible"`
}

type scenarioOptions struct {
	Scorer         string             `json:"scorer"`
	Seed           uint64             `json:"seed"`
	MaxAssignments int                `json:"maxAssignments"`
	Reservations   int                `json:"reservations"`
	Preempt        bool               `json:"preempt"`
	MinRuntime     string             `json:"minRuntime"`
	TeamWeights    map[string]float64 `json:"teamWeights"`
	Quotas         []placement.Quota  `json:"quotas"`
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range files {
		if strings.HasSuffix(path, ".golden.json") {
			continue
		}
		n++
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			snap, q, opts := loadScenario(t, path)
			plan := placement.Place(snap, q, opts)
			checkPlan(t, snap, q, freshScorer(t, opts), plan)
			got, err := json.MarshalIndent(plan, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := strings.TrimSuffix(path, ".json") + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./placement -run TestScenarios -update)", err)
			}
			if !bytes.Equal(want, got) {
				t.Errorf("plan differs from %s (-want +got):\n%s", golden, cmp.Diff(string(want), string(got)))
			}
		})
	}
	if n < 5 {
		t.Errorf("%d scenarios in testdata/scenarios, want at least 5", n)
	}
}

func loadScenario(t *testing.T, path string) (placement.Snapshot, []gangway.QueueEntry, placement.Options) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sc scenario
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	now := sc.Now
	if now.IsZero() {
		now = t0
	}
	dur := func(s, def string) time.Duration {
		if s == "" {
			s = def
		}
		if s == "" {
			return 0
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return d
	}

	f := fleet().at(now)
	for _, g := range sc.Nodes {
		ids := []string{g.ID}
		if g.Count > 0 {
			ids = ids[:0]
			for i := 1; i <= g.Count; i++ {
				ids = append(ids, fmt.Sprintf("%s-%d", g.ID, i))
			}
		}
		for _, id := range ids {
			b := node(id).rack(g.Rack).block(g.Block)
			if g.GPUs > 0 {
				b.gpus(g.GPUs, g.Model)
			}
			switch g.Domain {
			case "":
			case "node":
				b.domain("nvl-" + id)
			case "rack":
				b.domain("nvl72-" + g.Rack)
			default:
				b.domain(g.Domain)
			}
			if g.Pool != "" {
				b.pool(g.Pool)
			}
			if g.CPUMilli > 0 {
				b.cpu(g.CPUMilli)
			}
			if g.MemMiB > 0 {
				b.mem(g.MemMiB)
			}
			b.used(g.Used...).unhealthy(g.Unhealthy...)
			if g.Cordoned {
				b.cordoned()
			}
			f.nodes = append(f.nodes, b)
		}
	}
	for _, r := range sc.Running {
		rb := running(r.ID).team(r.Team).prio(r.Priority).started(now.Add(-dur(r.Ago, "1h"))).
			runtime(dur(r.MaxRuntime, "")).share(r.Milli)
		if r.Team == "" {
			rb.team("ml")
		}
		if r.Priority == 0 {
			rb.prio(100)
		}
		if r.Preemptible {
			rb.preemptible()
		}
		if r.Checkpoint != "" {
			rb.checkpoint(now.Add(-dur(r.Checkpoint, "")))
		}
		if r.CPUMilli > 0 || r.MemMiB > 0 {
			rb.res(r.CPUMilli, r.MemMiB)
		}
		for _, m := range r.Members {
			rb.on(m.Node, m.GPUs...)
		}
		f.with(rb)
	}

	var q []gangway.QueueEntry
	for _, sj := range sc.Queue {
		ids := []string{sj.ID}
		if sj.Count > 0 {
			ids = ids[:0]
			for i := 1; i <= sj.Count; i++ {
				ids = append(ids, fmt.Sprintf("%s-%d", sj.ID, i))
			}
		}
		for k, id := range ids {
			b := job(id).submitted(now.Add(-dur(sj.Age, "0s")).Add(time.Duration(k) * time.Second)).
				models(sj.Models...).pools(sj.Pools...).runtime(dur(sj.Runtime, ""))
			if sj.Team != "" {
				b.team(sj.Team)
			}
			if sj.Priority != 0 {
				b.prio(sj.Priority)
			}
			replicas := max(sj.Replicas, 1)
			switch {
			case sj.CPUOnly:
				b.cpuOnly().replicas(replicas)
			case sj.Milli > 0:
				b.share(sj.Milli).replicas(replicas)
			default:
				b.gang(replicas, max(sj.GPUs, 1))
			}
			if sj.CPUMilli > 0 {
				b.cpu(sj.CPUMilli)
			}
			if sj.MemMiB > 0 {
				b.mem(sj.MemMiB)
			}
			if sj.Topology != "" {
				levels := map[string]gangway.Level{"nvlink": gangway.LevelNVLink, "node": gangway.LevelNode,
					"rack": gangway.LevelRack, "block": gangway.LevelBlock}
				l, ok := levels[sj.Topology]
				if !ok {
					t.Fatalf("%s: job %s: unknown topology %q", path, id, sj.Topology)
				}
				b.topology(l, sj.Required)
			}
			if sj.Preemptible {
				b.preemptible()
			}
			q = append(q, b.j)
		}
	}

	o := sc.Options
	opts := placement.Options{Seed: o.Seed, MaxAssignments: o.MaxAssignments, Reservations: o.Reservations,
		Preempt: o.Preempt, MinRuntime: dur(o.MinRuntime, ""), Quotas: o.Quotas,
		Fairness: placement.Fairness{TeamWeights: o.TeamWeights}}
	if o.Scorer != "" {
		sc, err := baselines.ScorerByName(o.Scorer)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		opts.Scorer = sc
	}
	return f.build(), q, opts
}

// freshScorer is opts with a new scorer of the same policy: scorers keep
// per-session caches, so each Place call needs its own.
func freshScorer(t interface{ Fatalf(string, ...any) }, opts placement.Options) placement.Options {
	if opts.Scorer == nil {
		return opts
	}
	sc, err := baselines.ScorerByName(opts.Scorer.Name())
	if err != nil {
		t.Fatalf("scorer %s: %v", opts.Scorer.Name(), err)
	}
	opts.Scorer = sc
	return opts
}
