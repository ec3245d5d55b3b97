package placement_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

// benchFleet is a 10,000-node fleet of 8-GPU nodes, built from a fixed
// seed: 10% GB200 in rack-scale NVLink domains of 72 GPUs (9 nodes a
// rack), the rest H100, A100 and L4 with one NVLink domain per node; racks
// of 9 nodes, blocks of 20 racks, on-prem and cloud pools. About a third
// of the GPUs are busy: whole GPUs and shares held by 3,000 running jobs
// of 10 teams, and a few unhealthy GPUs and cordoned nodes.
func benchFleet(nodes int, seed uint64) placement.Snapshot {
	rnd := rand.New(rand.NewPCG(seed, 1))
	f := fleet()
	const perRack = 9
	for r := 0; r*perRack < nodes; r++ {
		rack, block := fmt.Sprintf("rack-%d", r), fmt.Sprintf("block-%d", r/20)
		model, pool := "H100", "onprem"
		switch x := rnd.IntN(10); {
		case x == 0:
			model = "GB200"
		case x < 4:
			model, pool = "A100", "cloud"
		case x == 4:
			model = "L4"
		}
		for k := 0; k < perRack && r*perRack+k < nodes; k++ {
			id := fmt.Sprintf("%s-%d", rack, k)
			b := node(id).gpus(8, model).rack(rack).block(block).pool(pool).cpu(128000).mem(2 << 20)
			if model == "GB200" {
				b.domain("nvl72-" + rack)
			} else {
				b.domain("nvl-" + id)
			}
			if rnd.IntN(200) == 0 {
				b.unhealthy(rnd.IntN(8))
			}
			if rnd.IntN(500) == 0 {
				b.cordoned()
			}
			f.nodes = append(f.nodes, b)
		}
	}
	teams := benchTeams()
	for k := range 3000 {
		n := f.nodes[rnd.IntN(len(f.nodes))]
		rb := running(fmt.Sprintf("run-%d", k)).team(teams[rnd.IntN(len(teams))]).
			prio([]int{50, 100, 200}[rnd.IntN(3)]).started(t0.Add(-time.Duration(rnd.IntN(600))*time.Minute)).
			runtime(time.Duration(rnd.IntN(24))*time.Hour).res(4000, 16384)
		if rnd.IntN(2) == 0 {
			rb.preemptible()
		}
		var free []int
		for g, gpu := range n.n.GPUs {
			if gpu.Healthy && gpu.UsedMilli == 0 && !busy(f.running, n.n.ID, g) {
				free = append(free, g)
			}
		}
		if len(free) == 0 {
			continue
		}
		if rnd.IntN(5) == 0 {
			rb.share(100*(1+rnd.IntN(9))).on(n.n.ID, free[0])
		} else {
			want := min(len(free), []int{1, 2, 4, 8}[rnd.IntN(4)])
			rb.on(n.n.ID, free[:want]...)
		}
		f.with(rb)
	}
	return f.build()
}

func busy(rs []*runBuilder, nodeID string, g int) bool {
	for _, r := range rs {
		for _, m := range r.r.Members {
			if m.NodeID == nodeID {
				for _, h := range m.GPUs {
					if h == g {
						return true
					}
				}
			}
		}
	}
	return false
}

func benchTeams() []string {
	return []string{"nlp", "vision", "speech", "rec", "ads", "search", "infra", "research", "robotics", "bio"}
}

// benchQueue is count pending jobs from a fixed seed: 20% GPU shares, 30%
// one GPU, 15% two, 12% four, 15% eight, 3% CPU-only, 5% gangs of 2 to 32
// replicas of 8 GPUs (half of them required in one NVLink domain or rack);
// half pinned to a model; three priority classes; 10 teams.
func benchQueue(count int, seed uint64) []gangway.QueueEntry {
	rnd := rand.New(rand.NewPCG(seed, 2))
	teams := benchTeams()
	models := []string{"H100", "A100", "L4", "GB200"}
	q := make([]gangway.QueueEntry, 0, count)
	for k := range count {
		b := job(fmt.Sprintf("job-%d", k)).team(teams[rnd.IntN(len(teams))]).
			prio([]int{50, 100, 100, 100, 200}[rnd.IntN(5)]).age(time.Duration(rnd.IntN(3600)) * time.Second).
			runtime(time.Duration(1+rnd.IntN(48)) * time.Hour).cpu(int64(1+rnd.IntN(8)) * 1000).mem(int64(1+rnd.IntN(64)) * 1024)
		switch x := rnd.IntN(100); {
		case x < 20:
			b.share(100 * (1 + rnd.IntN(9)))
		case x < 50:
			b.gang(1, 1)
		case x < 65:
			b.gang(1, 2)
		case x < 77:
			b.gang(1, 4)
		case x < 92:
			b.gang(1, 8)
		case x < 95:
			b.cpuOnly()
		default:
			b.gang(2+rnd.IntN(31), 8)
			switch rnd.IntN(4) {
			case 0:
				b.topology(gangway.LevelNVLink, true)
			case 1:
				b.topology(gangway.LevelRack, true)
			case 2:
				b.topology(gangway.LevelNVLink, false)
			}
		}
		if rnd.IntN(2) == 0 {
			b.models(models[rnd.IntN(len(models))])
		}
		q = append(q, b.j)
	}
	return q
}

// BenchmarkPlace times one full placement cycle: 10,000 pending jobs onto
// the 10,000-node fleet, every job assigned or explained. placements/s is
// jobs assigned per second of cycle, s/cycle the seconds one cycle takes.
// Sub-benchmarks without a sample size score every node (through node
// classes where the policy allows: the same plan). Targets, on one core
// (-cpu 1): issue 3, 20,000 placements/s and a cycle under a second;
// issue 15, the default policy (gangway) at 50,000 placements/s and a
// cycle within 200 ms.
func BenchmarkPlace(b *testing.B) {
	snap := benchFleet(10_000, 1)
	q := benchQueue(10_000, 1)
	for _, bc := range []struct {
		name   string
		sample int
	}{{"first-fit", 0}, {"gangway", 0}, {"fgd", 0}, {"gangway", 256}, {"fgd", 256}, {"gangway", 64}} {
		name := bc.name
		label := name
		if bc.sample > 0 {
			label = fmt.Sprintf("%s-sample%d", name, bc.sample)
		}
		b.Run(label, func(b *testing.B) {
			if _, err := baselines.ScorerByName(name); err != nil {
				b.Skipf("scorer %s: %v", name, err)
			}
			placed := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				opts := placement.Options{Seed: 1, SampleNodes: bc.sample}
				if name != "first-fit" {
					opts.Scorer, _ = baselines.ScorerByName(name)
				}
				plan := placement.Place(snap, q, opts)
				placed = len(plan.Assignments)
			}
			b.ReportMetric(float64(placed)*float64(b.N)/b.Elapsed().Seconds(), "placements/s")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/cycle")
			b.ReportMetric(float64(placed), "placed/cycle")
		})
	}
}
