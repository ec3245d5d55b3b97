package placement_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

// TestNodeClassesPlaceAlike checks that scoring one node per node class
// gives exactly the plans scoring every node gives, for every policy: on
// random fleets of a few kinds of node, most alike but some with partly
// used GPUs, shares, flaky or unhealthy GPUs, NUMA halves, little CPU or
// memory left, owners or cordons; random queues (shares, gangs, CPU-only,
// models, pools, topology, pinned nodes, demands near the nodes' limits);
// random options (reservations, preemption, quotas); and a second Place
// call on the same session. The whole plans are compared: assignments,
// preemptions, reservations and every reason with its detail.
func TestNodeClassesPlaceAlike(t *testing.T) {
	merged := 0 // cases where some class holds more than one node
	cases := 0
	rapid.Check(t, func(t *rapid.T) {
		snap := genClassFleet(t)
		q1, q2 := genClassQueue(t, snap, "a"), genClassQueue(t, snap, "b")
		opts := genOptions(t)
		if rapid.Bool().Draw(t, "customWorkload") {
			opts.Workload = placement.WorkloadFromJobs(genClassQueue(t, snap, "w"))
		} else {
			opts.Workload = placement.WorkloadFromJobs(q1)
		}
		cases++
		for _, name := range baselines.Names() {
			on, classes := placeTwice(t, name, snap, q1, q2, opts)
			off, _ := placeTwice(t, name, snap, q1, q2, placement.ScoreEachNode(opts))
			if d := cmp.Diff(off, on); d != "" {
				t.Fatalf("%s: plans with node classes differ from scoring every node (-each node +classes):\n%s\nsnapshot: %s\nqueues: %s\n%s",
					name, d, dump(snap), dump(q1), dump(q2))
			}
			if name == "gangway" && classes > 0 && classes < len(snap.Nodes) {
				merged++
			}
		}
	})
	t.Logf("%d of %d cases had nodes sharing a class", merged, cases)
	if merged == 0 {
		t.Errorf("no case had nodes sharing a class: the test does not exercise classes")
	}
}

// TestNodeClassesCases are plans that go wrong if a class scores with a
// representative's stale score or counts what its representative could
// hold for every member: each is placed with classes and scoring every
// node, and both must give the plan wanted.
func TestNodeClassesCases(t *testing.T) {
	tests := []struct {
		name        string
		scorer      string
		snap        placement.Snapshot
		queue       []gangway.QueueEntry
		workload    []placement.WorkloadClass
		wantNodes   []string // of each assignment's first member
		wantGPUs    [][]int  // of each assignment's first member, when set
		wantReasons map[string]placement.Reason
	}{
		{
			// GPU packing orders equal nodes by index: once j1 fills a,
			// the next best is b, not c, which now represents a's class.
			name:   "the next representative scores anew",
			scorer: "gpu-packing",
			snap: fleet(node("a").gpus(8, "H100"), node("b").gpus(8, "H100").pool("cloud"),
				node("c").gpus(8, "H100")).build(),
			queue:     queue(job("j1").gang(1, 8), job("j2").gang(1, 8)),
			wantNodes: []string{"a", "b"},
		},
		{
			// a and b have the same free CPU, but b twice the capacity:
			// together they could hold the three replicas one day.
			name:   "the census counts each member's capacity",
			scorer: "gangway",
			snap: fleet(node("a").gpus(8, "H100").used(seq(0, 8)...).cpu(64000),
				node("b").gpus(8, "H100").used(seq(0, 8)...).cpu(128000).usedCPU(64000)).build(),
			queue:       queue(job("j1").gang(3, 1).cpu(40000)),
			wantReasons: map[string]placement.Reason{"j1": placement.ReasonInsufficientGPUs},
		},
		{
			// a and c hold the same GPUs at other indexes. j1 takes a's
			// CPU; j2 reuses the class's score, but its GPU on c is the
			// other index: the free one, which fills c's domain.
			name:   "a score from another member is placed on the representative's own GPUs",
			scorer: "topology",
			snap: fleet(node("a").gpus(2, "H100").domain("nvl-a").usedMilli(1, 500),
				node("c").gpus(2, "H100").domain("nvl-c").usedMilli(0, 500)).build(),
			queue:     queue(job("j1").share(300).cpu(64000).prio(200), job("j2").share(300).cpu(1000)),
			wantNodes: []string{"a", "c"},
			wantGPUs:  [][]int{{0}, {1}},
		},
		{
			// b's CPU runs out before its GPUs at the workload's 32 cores
			// per GPU; a GPU-heavy replica there strands less, so Gangway
			// prefers it to a, though both have more CPU than any class
			// or replica asks.
			name:      "free CPU is keyed up to where Gangway stops counting stranded GPUs",
			scorer:    "gangway",
			snap:      fleet(node("a").gpus(8, "H100").cpu(300000), node("b").gpus(8, "H100").cpu(300000).usedCPU(100000)).build(),
			queue:     queue(job("j1").cpu(1000)),
			workload:  []placement.WorkloadClass{{GPUs: 1, Milli: placement.Whole, CPUMilli: 32000, Weight: 1}},
			wantNodes: []string{"b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var plans []placement.Plan
			for _, opts := range []placement.Options{{}, placement.ScoreEachNode(placement.Options{})} {
				sc, err := baselines.ScorerByName(tt.scorer)
				if err != nil {
					t.Fatal(err)
				}
				opts.Scorer, opts.Workload = sc, tt.workload
				plan := placement.Place(tt.snap, tt.queue, opts)
				plans = append(plans, plan)
				var nodes []string
				var gpus [][]int
				for _, a := range plan.Assignments {
					nodes = append(nodes, a.Members[0].NodeID)
					gpus = append(gpus, a.Members[0].GPUs)
				}
				if d := cmp.Diff(tt.wantNodes, nodes); d != "" {
					t.Errorf("nodes (-want +got):\n%s", d)
				}
				if d := cmp.Diff(tt.wantGPUs, gpus); tt.wantGPUs != nil && d != "" {
					t.Errorf("GPUs (-want +got):\n%s", d)
				}
				for _, u := range plan.Unplaced {
					if want := tt.wantReasons[u.JobID]; u.Reason != want {
						t.Errorf("%s: reason %s (%s), want %s", u.JobID, u.Reason, u.Detail, want)
					}
				}
			}
			if d := cmp.Diff(plans[1], plans[0]); d != "" {
				t.Errorf("plans with node classes differ from scoring every node (-each node +classes):\n%s", d)
			}
		})
	}
}

// placeTwice places q1, then an hour later q2, on one session with a fresh
// scorer named name, and returns both plans and how many node classes the
// session ended with (0 when it scored nodes one by one).
func placeTwice(t *rapid.T, name string, snap placement.Snapshot, q1, q2 []gangway.QueueEntry, opts placement.Options) ([]placement.Plan, int) {
	sc, err := baselines.ScorerByName(name)
	if err != nil {
		t.Fatalf("scorer %s: %v", name, err)
	}
	opts.Scorer = sc
	se := placement.NewSession(snap, opts)
	plans := []placement.Plan{se.Place(q1)}
	se.SetNow(snap.Now.Add(time.Hour))
	plans = append(plans, se.Place(q2))
	return plans, placement.NodeClasses(se)
}

// genClassFleet is up to 40 nodes of one to three kinds (model, pool, GPU
// count, NVLink and NUMA layout, CPU and memory, GPUs in use), most exactly
// their kind, the others varied in one way, plus running allocations.
func genClassFleet(t *rapid.T) placement.Snapshot {
	type kind struct {
		model, pool string
		gpus        int
		domains     int // 0 none, 1 one per node, 2 halves, 3 rack-scale
		numaHalves  bool
		cpu, mem    int64
		used        int // GPUs in use from index 0
		share       int // milli used on the next GPU (0: none)
		mig         int // GPUs that are MIG devices, from the last one down
		profile     string
	}
	kinds := make([]kind, rapid.IntRange(1, 3).Draw(t, "kinds"))
	for k := range kinds {
		id := fmt.Sprintf("kind%d", k)
		kd := kind{
			model:      rapid.SampledFrom([]string{"H100", "A100", ""}).Draw(t, id+".model"),
			pool:       rapid.SampledFrom([]string{"onprem", "cloud"}).Draw(t, id+".pool"),
			gpus:       rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, id+".gpus"),
			domains:    rapid.IntRange(0, 3).Draw(t, id+".domains"),
			numaHalves: rapid.Bool().Draw(t, id+".numaHalves"),
			cpu:        int64(rapid.SampledFrom([]int{8, 32, 128}).Draw(t, id+".cpus")) * 1000,
			mem:        int64(rapid.SampledFrom([]int{32, 256, 2048}).Draw(t, id+".memGiB")) * 1024,
		}
		if kd.model == "" {
			kd.gpus = 0
		}
		kd.used = rapid.IntRange(0, kd.gpus).Draw(t, id+".used")
		if kd.used < kd.gpus {
			kd.share = rapid.SampledFrom([]int{0, 0, 300, 500}).Draw(t, id+".share")
		}
		if kd.gpus > 0 && rapid.IntRange(0, 3).Draw(t, id+".hasMIG") == 0 {
			kd.mig = rapid.IntRange(1, kd.gpus).Draw(t, id+".mig")
			kd.profile = rapid.SampledFrom(genMIGProfiles).Draw(t, id+".profile")
		}
		kinds[k] = kd
	}
	count := rapid.IntRange(1, 40).Draw(t, "nodes")
	var f fleetBuilder
	f.now = t0
	for i := range count {
		id := fmt.Sprintf("n%02d", i)
		kd := kinds[rapid.IntRange(0, len(kinds)-1).Draw(t, id+".kind")]
		rack := fmt.Sprintf("r%d", i/rapid.IntRange(2, 9).Draw(t, id+".perRack"))
		b := node(id).rack(rack).block("b1").pool(kd.pool).cpu(kd.cpu).mem(kd.mem)
		if kd.gpus > 0 {
			b.gpus(kd.gpus, kd.model)
			switch kd.domains {
			case 1:
				b.domain("nvl-" + id)
			case 2:
				b.domain("nvl-"+id+"a", seq(0, kd.gpus/2)...).domain("nvl-"+id+"b", seq(kd.gpus/2, kd.gpus-kd.gpus/2)...)
			case 3:
				b.domain("nvl72-" + rack)
			}
			for g := range kd.gpus {
				if kd.numaHalves && g >= kd.gpus/2 {
					b.n.GPUs[g].NUMA = 1
				}
				if g < kd.used {
					b.used(g)
				} else if g == kd.used && kd.share > 0 {
					b.usedMilli(g, kd.share)
				}
				if g >= kd.gpus-kd.mig && b.n.GPUs[g].UsedMilli != placement.Whole {
					b.n.GPUs[g].UsedMilli = 0
					b.mig(kd.profile, g)
				}
			}
		}
		switch rapid.IntRange(0, 11).Draw(t, id+".vary") {
		case 0: // GPUs used differently
			for g := range b.n.GPUs {
				switch rapid.IntRange(0, 5).Draw(t, fmt.Sprintf("%s.gpu%d", id, g)) {
				case 0:
					b.n.GPUs[g].UsedMilli = 0
				case 1:
					b.n.GPUs[g].UsedMilli = placement.Whole
				case 2:
					b.n.GPUs[g].UsedMilli = rapid.SampledFrom([]int{200, 500, 700}).Draw(t, fmt.Sprintf("%s.gpu%d.milli", id, g))
				}
			}
		case 1: // an unhealthy or a flaky GPU
			if len(b.n.GPUs) > 0 {
				g := rapid.IntRange(0, len(b.n.GPUs)-1).Draw(t, id+".bad")
				if rapid.Bool().Draw(t, id+".flaky") {
					b.n.GPUs[g].Flakiness = 2
				} else {
					b.unhealthy(g)
				}
			}
		case 2: // little CPU or memory left
			b.n.UsedCPUMilli = kd.cpu - int64(rapid.IntRange(0, 8).Draw(t, id+".cpuLeft"))*1000
			b.n.UsedMemMiB = kd.mem - int64(rapid.IntRange(0, 32).Draw(t, id+".memLeftGiB"))*1024
		case 3:
			b.cordoned()
		case 4:
			b.n.Owner = rapid.SampledFrom([]string{"a1", "b2", "x"}).Draw(t, id+".owner")
		case 5, 6: // the kind's GPUs in use, at other indexes
			layout := slices.Clone(b.n.GPUs)
			slices.Reverse(b.n.GPUs)
			for g := range b.n.GPUs {
				b.n.GPUs[g].Index, b.n.GPUs[g].NUMA, b.n.GPUs[g].Domain = g, layout[g].NUMA, layout[g].Domain
			}
		case 7: // as much free, more capacity (what the census counts)
			b.n.UsedCPUMilli += b.n.CPUMilli
			b.n.UsedMemMiB += b.n.MemMiB
			b.n.CPUMilli *= 2
			b.n.MemMiB *= 2
		}
		f.nodes = append(f.nodes, b)
	}
	snap := f.build()
	for k := range rapid.IntRange(0, 8).Draw(t, "running") {
		id := fmt.Sprintf("r%d", k+1)
		n := &snap.Nodes[rapid.IntRange(0, len(snap.Nodes)-1).Draw(t, id+".node")]
		rb := running(id).team(rapid.SampledFrom(genTeams).Draw(t, id+".team")).
			prio(rapid.SampledFrom([]int{50, 100, 200}).Draw(t, id+".prio")).
			runtime(time.Duration(rapid.SampledFrom([]int{0, 30, 120}).Draw(t, id+".runtimeMin"))*time.Minute).
			res(int64(rapid.IntRange(0, 4).Draw(t, id+".cpus"))*1000, 1024)
		if rapid.Bool().Draw(t, id+".preemptible") {
			rb.preemptible()
		}
		if n.CPUMilli-n.UsedCPUMilli < rb.r.CPUMilli || n.MemMiB-n.UsedMemMiB < rb.r.MemMiB {
			continue
		}
		var free, freeMIG []int
		for g, gpu := range n.GPUs {
			switch {
			case !gpu.Healthy || gpu.UsedMilli > 0:
			case gpu.MIG != "":
				freeMIG = append(freeMIG, g)
			default:
				free = append(free, g)
			}
		}
		switch {
		case len(freeMIG) > 0 && rapid.Bool().Draw(t, id+".mig"):
			rb.mig(n.GPUs[freeMIG[0]].MIG).on(n.ID, freeMIG[0])
		case len(free) > 0 && rapid.Bool().Draw(t, id+".share"):
			rb.share(rapid.SampledFrom([]int{200, 500}).Draw(t, id+".milli")).on(n.ID, free[0])
		default:
			rb.on(n.ID, free[:rapid.IntRange(0, len(free)).Draw(t, id+".gpus")]...)
		}
		r := rb.r
		for i := range r.Members {
			r.Members[i].Pool, r.Members[i].Addr, r.Members[i].Milli = n.Pool, n.Addr, rb.milli
			if rb.profile != "" {
				r.Members[i].MIG, r.Members[i].MIGMilli = rb.profile, gangway.MIGMilli(n.Model, rb.profile)
			}
		}
		snap.Running = append(snap.Running, r)
		chargeNodes(&snap, r, +1)
	}
	return snap
}

// genClassQueue is up to 30 jobs named prefix1, prefix2, ...: shares,
// whole GPUs, gangs and CPU-only jobs, with CPU and memory demands from
// none to about what a node has, models, pools, topology, runtimes on both
// sides of LongRuntime (flaky GPUs), and now and then pinned to nodes.
func genClassQueue(t *rapid.T, snap placement.Snapshot, prefix string) []gangway.QueueEntry {
	count := rapid.IntRange(0, 30).Draw(t, prefix+".jobs")
	q := make([]gangway.QueueEntry, 0, count)
	for i := range count {
		id := fmt.Sprintf("%s%d", prefix, i+1)
		b := job(id).team(rapid.SampledFrom(genTeams).Draw(t, id+".team")).
			prio(rapid.SampledFrom([]int{50, 100, 200}).Draw(t, id+".prio")).
			age(time.Duration(rapid.IntRange(0, 60).Draw(t, id+".ageMin")) * time.Minute).
			runtime(time.Duration(rapid.SampledFrom([]int{0, 10, 60, 600}).Draw(t, id+".runtimeMin")) * time.Minute).
			cpu(int64(rapid.SampledFrom([]int{0, 1, 4, 8, 30, 120}).Draw(t, id+".cpus")) * 1000).
			mem(int64(rapid.SampledFrom([]int{0, 1, 16, 200, 1500}).Draw(t, id+".memGiB")) * 1024)
		replicas := rapid.IntRange(1, 4).Draw(t, id+".replicas")
		switch rapid.IntRange(0, 6).Draw(t, id+".shape") {
		case 0, 1:
			b.share(rapid.SampledFrom([]int{100, 300, 500, 800}).Draw(t, id+".milli")).replicas(replicas)
		case 2:
			b.cpuOnly().replicas(replicas)
		case 3:
			b.mig(rapid.SampledFrom(genMIGProfiles).Draw(t, id+".mig")).replicas(replicas)
		default:
			b.gang(replicas, rapid.SampledFrom([]int{1, 1, 2, 4, 8}).Draw(t, id+".gpusPer"))
		}
		if rapid.IntRange(0, 2).Draw(t, id+".pinModel") == 0 {
			b.models(rapid.SampledFrom(genModels).Draw(t, id+".model"))
		}
		if rapid.IntRange(0, 5).Draw(t, id+".pinPool") == 0 {
			b.pools(rapid.SampledFrom([]string{"onprem", "cloud"}).Draw(t, id+".pool"))
		}
		if lvl := rapid.IntRange(0, 6).Draw(t, id+".topology"); lvl > 0 && lvl <= len(gangway.Levels) && b.j.GPUsPerReplica > 0 {
			b.topology(gangway.Levels[lvl-1], rapid.Bool().Draw(t, id+".required"))
		}
		if rapid.IntRange(0, 7).Draw(t, id+".pinNodes") == 0 {
			n := snap.Nodes[rapid.IntRange(0, len(snap.Nodes)-1).Draw(t, id+".node")]
			b.j.Nodes = []string{n.ID}
		}
		if rapid.Bool().Draw(t, id+".preemptible") {
			b.preemptible()
		}
		q = append(q, b.j)
	}
	return q
}
