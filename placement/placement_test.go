package placement_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

func TestFirstFitPlace(t *testing.T) {
	cases := map[string]struct {
		fleet       placement.Snapshot
		queue       []gangway.QueueEntry
		opts        placement.Options
		wantPlaced  []gangway.Assignment
		wantWaiting []placement.Unplaced
	}{
		"empty queue": {
			fleet: fleet(node("n1").gpus(8, "H100")),
		},
		"empty fleet": {
			queue: queue(job("j1")),
			wantWaiting: []placement.Unplaced{waiting("j1", placement.ReasonNeverFits,
				"1 × 1 GPUs: the fleet holds at most 0 such replicas (0 matching nodes)")},
		},
		"one GPU goes to the first node": {
			fleet:      fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")),
			queue:      queue(job("j1")),
			wantPlaced: []gangway.Assignment{placed("j1", on(0, "n1", 0))},
		},
		"used GPUs are skipped": {
			fleet:      fleet(node("n1").gpus(8, "H100").used(0, 1, 2)),
			queue:      queue(job("j1").gang(1, 2)),
			wantPlaced: []gangway.Assignment{placed("j1", on(0, "n1", 3, 4))},
		},
		"jobs take GPUs in queue order": {
			fleet: fleet(node("n1").gpus(8, "H100")),
			queue: queue(job("j1").gang(1, 3), job("j2").gang(1, 3), job("j3").gang(1, 3)),
			wantPlaced: []gangway.Assignment{
				placed("j1", on(0, "n1", 0, 1, 2)),
				placed("j2", on(0, "n1", 3, 4, 5)),
			},
			wantWaiting: []placement.Unplaced{waiting("j3", placement.ReasonInsufficientGPUs,
				"1 × 3 GPUs: only 0 replicas fit in free GPUs now (largest free block 2 GPUs)")},
		},
		"attempt is carried into the assignment": {
			fleet:      fleet(node("n1").gpus(8, "H100")),
			queue:      queue(job("j1").attempt(3)),
			wantPlaced: []gangway.Assignment{atAttempt(placed("j1", on(0, "n1", 0)), 3)},
		},
		"gang spans two nodes": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")),
			queue: queue(job("j1").gang(2, 8).models("H100")),
			wantPlaced: []gangway.Assignment{placed("j1",
				on(0, "n1", seq(0, 8)...), on(1, "n2", seq(0, 8)...))},
		},
		"gang replicas share a node that has room": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")),
			queue: queue(job("j1").gang(2, 4)),
			wantPlaced: []gangway.Assignment{placed("j1",
				on(0, "n1", 0, 1, 2, 3), on(1, "n1", 4, 5, 6, 7))},
		},
		// j1's rank 0 fits on n1 but rank 1 fits nowhere. The half-placed
		// gang must leave n1 free for j2, and j1's reason is computed
		// against the fleet as it was, not with its own rank 0 taken.
		"gang that fits partially leaves no GPU trace": {
			fleet:      fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100").used(0, 1, 2, 3)),
			queue:      queue(job("j1").gang(2, 8), job("j2").gang(1, 8)),
			wantPlaced: []gangway.Assignment{placed("j2", on(0, "n1", seq(0, 8)...))},
			wantWaiting: []placement.Unplaced{waiting("j1", placement.ReasonInsufficientGPUs,
				"2 × 8 GPUs: only 1 replicas fit in free GPUs now (largest free block 8 GPUs)")},
		},
		"gang that fits partially leaves no CPU or memory trace": {
			fleet: fleet(
				node("n1").gpus(4, "H100").cpu(8000).mem(64*1024),
				node("n2").gpus(8, "H100").used(0, 1, 2, 3, 4, 5)),
			queue:      queue(job("j1").gang(2, 4).cpu(8000).mem(64*1024), job("j2").cpu(8000).mem(64*1024)),
			wantPlaced: []gangway.Assignment{placed("j2", on(0, "n1", 0))},
			wantWaiting: []placement.Unplaced{waiting("j1", placement.ReasonInsufficientGPUs,
				"2 × 4 GPUs: only 1 replicas fit in free GPUs now (largest free block 4 GPUs)")},
		},
		"a job that does not fit does not block smaller jobs behind it": {
			fleet:      fleet(node("n1").gpus(8, "H100").used(0, 1, 2, 3)),
			queue:      queue(job("big").gang(1, 8), job("small").gang(1, 4)),
			wantPlaced: []gangway.Assignment{placed("small", on(0, "n1", 4, 5, 6, 7))},
			wantWaiting: []placement.Unplaced{waiting("big", placement.ReasonInsufficientGPUs,
				"1 × 8 GPUs: only 0 replicas fit in free GPUs now (largest free block 4 GPUs)")},
		},
		"GPU model constraint": {
			fleet:      fleet(node("n1").gpus(8, "A100"), node("n2").gpus(8, "H100")),
			queue:      queue(job("j1").gang(1, 8).models("H100")),
			wantPlaced: []gangway.Assignment{placed("j1", on(0, "n2", seq(0, 8)...))},
		},
		"any of several GPU models": {
			fleet:      fleet(node("n1").gpus(8, "B200"), node("n2").gpus(8, "A100")),
			queue:      queue(job("j1").models("H100", "A100")),
			wantPlaced: []gangway.Assignment{placed("j1", on(0, "n2", 0))},
		},
		"pool constraint": {
			fleet:      fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100").pool("aws")),
			queue:      queue(job("j1").pools("aws")),
			wantPlaced: []gangway.Assignment{placed("j1", inPool(on(0, "n2", 0), "aws"))},
		},
		"model and pool together": {
			fleet: fleet(
				node("n1").gpus(8, "H100"),
				node("n2").gpus(8, "A100").pool("aws"),
				node("n3").gpus(8, "H100").pool("aws")),
			queue:      queue(job("j1").models("H100").pools("aws")),
			wantPlaced: []gangway.Assignment{placed("j1", inPool(on(0, "n3", 0), "aws"))},
		},
		"unschedulable node is skipped": {
			fleet:      fleet(node("n1").gpus(8, "H100").cordoned(), node("n2").gpus(8, "H100")),
			queue:      queue(job("j1")),
			wantPlaced: []gangway.Assignment{placed("j1", on(0, "n2", 0))},
		},
		"node without enough CPU is skipped": {
			fleet:      fleet(node("n1").gpus(8, "H100").cpu(500), node("n2").gpus(8, "H100")),
			queue:      queue(job("j1").cpu(1000)),
			wantPlaced: []gangway.Assignment{placed("j1", on(0, "n2", 0))},
		},
		"node without enough memory is skipped": {
			fleet:      fleet(node("n1").gpus(8, "H100").mem(1024), node("n2").gpus(8, "H100")),
			queue:      queue(job("j1").mem(4096)),
			wantPlaced: []gangway.Assignment{placed("j1", on(0, "n2", 0))},
		},
		"CPU runs out before GPUs do": {
			fleet: fleet(node("n1").gpus(8, "H100").cpu(2000), node("n2").gpus(8, "H100")),
			queue: queue(job("j1").gang(3, 1).cpu(1000)),
			wantPlaced: []gangway.Assignment{placed("j1",
				on(0, "n1", 0), on(1, "n1", 1), on(2, "n2", 0))},
		},
		"CPU taken by an earlier job stays taken": {
			fleet:      fleet(node("n1").gpus(8, "H100").cpu(2000), node("n2").gpus(8, "H100")),
			queue:      queue(job("j1").cpu(2000), job("j2").cpu(1000)),
			wantPlaced: []gangway.Assignment{placed("j1", on(0, "n1", 0)), placed("j2", on(0, "n2", 0))},
		},
		"max assignments fills the plan": {
			fleet: fleet(node("n1").gpus(8, "H100")),
			queue: queue(job("j1"), job("j2"), job("j3"), job("j4")),
			opts:  placement.Options{MaxAssignments: 2},
			wantPlaced: []gangway.Assignment{
				placed("j1", on(0, "n1", 0)),
				placed("j2", on(0, "n1", 1)),
			},
			wantWaiting: []placement.Unplaced{
				waiting("j3", placement.ReasonPlanFull, "this cycle already starts 2 jobs"),
				waiting("j4", placement.ReasonPlanFull, "this cycle already starts 2 jobs"),
			},
		},
		"jobs left waiting do not count toward max assignments": {
			fleet:      fleet(node("n1").gpus(8, "H100")),
			queue:      queue(job("j1").models("B200"), job("j2")),
			opts:       placement.Options{MaxAssignments: 1},
			wantPlaced: []gangway.Assignment{placed("j2", on(0, "n1", 0))},
			wantWaiting: []placement.Unplaced{waiting("j1", placement.ReasonNeverFits,
				"1 × 1 GPUs ([B200]): the fleet holds at most 0 such replicas (0 matching nodes)")},
		},
		"never fits: no node has the model": {
			fleet: fleet(node("n1").gpus(8, "H100")),
			queue: queue(job("j1").models("B200")),
			wantWaiting: []placement.Unplaced{waiting("j1", placement.ReasonNeverFits,
				"1 × 1 GPUs ([B200]): the fleet holds at most 0 such replicas (0 matching nodes)")},
		},
		"never fits: no node is in the pool": {
			fleet: fleet(node("n1").gpus(8, "H100")),
			queue: queue(job("j1").pools("gcp")),
			wantWaiting: []placement.Unplaced{waiting("j1", placement.ReasonNeverFits,
				"1 × 1 GPUs: the fleet holds at most 0 such replicas (0 matching nodes)")},
		},
		"never fits: a replica is larger than any node": {
			fleet: fleet(node("n1").gpus(4, "H100")),
			queue: queue(job("j1").gang(1, 8)),
			wantWaiting: []placement.Unplaced{waiting("j1", placement.ReasonNeverFits,
				"1 × 8 GPUs: the fleet holds at most 0 such replicas (1 matching nodes)")},
		},
		"never fits: the gang is larger than the fleet": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100").used(0)),
			queue: queue(job("j1").gang(3, 8)),
			wantWaiting: []placement.Unplaced{waiting("j1", placement.ReasonNeverFits,
				"3 × 8 GPUs: the fleet holds at most 2 such replicas (2 matching nodes)")},
		},
		"free GPUs but no CPU left: the reason says so": {
			fleet: fleet(node("n1").gpus(8, "H100").cpu(1000).mem(1024)),
			queue: queue(job("j1").cpu(2000).mem(512)),
			wantWaiting: []placement.Unplaced{waiting("j1", placement.ReasonInsufficientGPUs,
				"1 × 1 GPUs: enough free GPUs, but only 0 replicas fit in free CPU and memory (2000 mCPU, 512 MiB each)")},
		},
		"cordoned nodes count toward what could fit, not toward what fits now": {
			fleet: fleet(node("n1").gpus(8, "H100").cordoned(), node("n2").gpus(8, "H100")),
			queue: queue(job("j1").gang(2, 8)),
			wantWaiting: []placement.Unplaced{waiting("j1", placement.ReasonInsufficientGPUs,
				"2 × 8 GPUs: only 1 replicas fit in free GPUs now (largest free block 8 GPUs); 1 matching nodes are cordoned or not heartbeating")},
		},
		"insufficient free GPUs counts whole replicas": {
			fleet: fleet(node("n1").gpus(8, "H100").used(0, 1, 2, 3, 4), node("n2").gpus(8, "H100").used(0, 1, 2)),
			queue: queue(job("j1").gang(3, 4).models("H100")),
			wantWaiting: []placement.Unplaced{waiting("j1", placement.ReasonInsufficientGPUs,
				"3 × 4 GPUs ([H100]): only 1 replicas fit in free GPUs now (largest free block 5 GPUs)")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := placement.FirstFit{}.Place(tc.fleet, tc.queue, tc.opts)
			want := placement.Plan{Assignments: tc.wantPlaced, Unplaced: tc.wantWaiting}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Place() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlaceStampsSnapshotTime(t *testing.T) {
	s := fleet(node("n1").gpus(8, "H100"))
	s.Now = t0.Add(90 * time.Second)
	plan := placement.FirstFit{}.Place(s, queue(job("j1"), job("j2").gang(2, 2)), placement.Options{})
	if len(plan.Assignments) != 2 {
		t.Fatalf("got %d assignments, want 2: %+v", len(plan.Assignments), plan)
	}
	for _, a := range plan.Assignments {
		if !a.At.Equal(s.Now) {
			t.Errorf("assignment %s: At = %v, want the snapshot's Now %v", a.JobID, a.At, s.Now)
		}
	}
}

func TestPlaceIsDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	s := randomFleet(r, 50, 8)
	q := randomQueue(r, 200)
	first := placement.FirstFit{}.Place(s, q, placement.Options{})
	second := placement.FirstFit{}.Place(s, q, placement.Options{})
	if len(first.Assignments) == 0 || len(first.Unplaced) == 0 {
		t.Fatalf("fixture should both place and leave jobs waiting: %d placed, %d waiting",
			len(first.Assignments), len(first.Unplaced))
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("same input, different plans (-first +second):\n%s", diff)
	}
}

// TestPlaceProperties checks the invariants of DESIGN.md on random fleets
// and queues: no GPU double-booked or used while busy or cordoned, gangs
// all-or-nothing, every job accounted for once, CPU and memory respected,
// the snapshot untouched, and no job left waiting that could have run.
func TestPlaceProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genFleet(t)
		q := genQueue(t)
		opts := placement.Options{MaxAssignments: rapid.SampledFrom([]int{0, 0, 1, 3, 10}).Draw(t, "maxAssignments")}
		before := cloneSnapshot(s)

		plan := placement.FirstFit{}.Place(s, q, opts)

		// (e) the snapshot is not mutated, and the same input gives the same plan.
		if diff := cmp.Diff(before, s); diff != "" {
			t.Fatalf("Place mutated the snapshot (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(plan, placement.FirstFit{}.Place(s, q, opts)); diff != "" {
			t.Fatalf("Place is not deterministic (-first +second):\n%s", diff)
		}

		nodes := map[string]placement.Node{}
		for _, n := range s.Nodes {
			nodes[n.ID] = n
		}
		jobs := map[string]gangway.QueueEntry{}
		for _, e := range q {
			jobs[e.JobID] = e
		}

		// (c) every job is placed or waiting, exactly once.
		seen := map[string]int{}
		for _, a := range plan.Assignments {
			seen[a.JobID]++
		}
		for _, u := range plan.Unplaced {
			seen[u.JobID]++
		}
		for _, e := range q {
			if seen[e.JobID] != 1 {
				t.Fatalf("job %s appears %d times in the plan, want 1", e.JobID, seen[e.JobID])
			}
		}
		if len(seen) != len(q) {
			t.Fatalf("plan names %d jobs, queue has %d", len(seen), len(q))
		}
		if opts.MaxAssignments > 0 && len(plan.Assignments) > opts.MaxAssignments {
			t.Fatalf("%d assignments, MaxAssignments is %d", len(plan.Assignments), opts.MaxAssignments)
		}

		type gpu struct {
			node string
			idx  int
		}
		owner := map[gpu]string{}
		cpu := map[string]int64{}
		mem := map[string]int64{}
		for _, a := range plan.Assignments {
			e := jobs[a.JobID]
			if a.Attempt != e.Attempt || !a.At.Equal(s.Now) {
				t.Fatalf("assignment %s: attempt %d at %v, want attempt %d at %v", a.JobID, a.Attempt, a.At, e.Attempt, s.Now)
			}
			// (b) all or nothing: every replica, each with its full share.
			if len(a.Members) != e.Replicas {
				t.Fatalf("job %s: %d members, want %d replicas", a.JobID, len(a.Members), e.Replicas)
			}
			for rank, m := range a.Members {
				n, ok := nodes[m.NodeID]
				if !ok {
					t.Fatalf("job %s rank %d: unknown node %q", a.JobID, rank, m.NodeID)
				}
				if m.Rank != rank || m.Pool != n.Pool || m.Addr != n.Addr {
					t.Fatalf("job %s member %d: %+v does not match rank %d on node %+v", a.JobID, rank, m, rank, n)
				}
				if len(e.GPUModels) > 0 && !slices.Contains(e.GPUModels, n.Model) {
					t.Fatalf("job %s wants %v, got %s on %s", a.JobID, e.GPUModels, n.Model, n.ID)
				}
				if len(e.Pools) > 0 && !slices.Contains(e.Pools, n.Pool) {
					t.Fatalf("job %s wants pools %v, got %s on %s", a.JobID, e.Pools, n.Pool, n.ID)
				}
				if !n.Schedulable {
					t.Fatalf("job %s rank %d placed on unschedulable node %s", a.JobID, rank, n.ID)
				}
				if len(m.GPUs) != e.GPUsPerReplica {
					t.Fatalf("job %s rank %d: %d GPUs, want %d", a.JobID, rank, len(m.GPUs), e.GPUsPerReplica)
				}
				// (a) no GPU twice, never a used one.
				for _, g := range m.GPUs {
					if !slices.Contains(n.Free, g) {
						t.Fatalf("job %s rank %d: GPU %d on %s is not free (free: %v)", a.JobID, rank, g, n.ID, n.Free)
					}
					k := gpu{n.ID, g}
					if other, taken := owner[k]; taken {
						t.Fatalf("GPU %d on %s assigned to both %s and %s", g, n.ID, other, a.JobID)
					}
					owner[k] = a.JobID
				}
				cpu[n.ID] += e.CPUMilli
				mem[n.ID] += e.MemMiB
			}
		}
		// (d) CPU and memory per node.
		for id, n := range nodes {
			if cpu[id] > n.FreeCPUMilli || mem[id] > n.FreeMemMiB {
				t.Fatalf("node %s: assigned %dm CPU / %d MiB, free was %dm / %d MiB", id, cpu[id], mem[id], n.FreeCPUMilli, n.FreeMemMiB)
			}
		}

		// Reasons are honest. Free capacity only shrinks during a Place
		// call, so a job that did not fit then does not fit in what is left
		// at the end either; and NeverFits means the whole fleet, cordoned nodes included,
		// could not hold it.
		left := map[string]capacityLeft{}
		for _, n := range s.Nodes {
			c := capacityLeft{cpu: n.FreeCPUMilli - cpu[n.ID], mem: n.FreeMemMiB - mem[n.ID]}
			for _, g := range n.Free {
				if _, taken := owner[gpu{n.ID, g}]; !taken {
					c.gpus++
				}
			}
			left[n.ID] = c
		}
		for _, u := range plan.Unplaced {
			e := jobs[u.JobID]
			switch u.Reason {
			case placement.ReasonPlanFull:
				if len(plan.Assignments) != opts.MaxAssignments {
					t.Fatalf("job %s: PlanFull with %d assignments, max %d", e.JobID, len(plan.Assignments), opts.MaxAssignments)
				}
			case placement.ReasonInsufficientGPUs, placement.ReasonNeverFits:
				if fit := replicasThatFit(s.Nodes, left, e); fit >= e.Replicas {
					t.Fatalf("job %s left waiting (%s: %s) but %d of its %d replicas fit in what is still free",
						e.JobID, u.Reason, u.Detail, fit, e.Replicas)
				}
				ever := 0
				for _, n := range s.Nodes {
					if matches(n, e) { // cordoned and lost nodes may come back
						ever += n.GPUs / e.GPUsPerReplica
					}
				}
				if never := ever < e.Replicas; never != (u.Reason == placement.ReasonNeverFits) {
					t.Fatalf("job %s: reason %s, but the fleet holds %d of its %d replicas", e.JobID, u.Reason, ever, e.Replicas)
				}
			default:
				t.Fatalf("job %s: unknown reason %q", e.JobID, u.Reason)
			}
		}
	})
}

type capacityLeft struct {
	gpus     int
	cpu, mem int64
}

// replicasThatFit is how many replicas of e the leftover capacity holds,
// counted node by node (replicas are identical, so this is exact).
func replicasThatFit(nodes []placement.Node, left map[string]capacityLeft, e gangway.QueueEntry) int {
	fit := 0
	for _, n := range nodes {
		if !n.Schedulable || !matches(n, e) {
			continue
		}
		c := left[n.ID]
		k := c.gpus / e.GPUsPerReplica
		if e.CPUMilli > 0 {
			k = min(k, int(c.cpu/e.CPUMilli))
		}
		if e.MemMiB > 0 {
			k = min(k, int(c.mem/e.MemMiB))
		}
		fit += k
	}
	return fit
}

func matches(n placement.Node, e gangway.QueueEntry) bool {
	return (len(e.GPUModels) == 0 || slices.Contains(e.GPUModels, n.Model)) &&
		(len(e.Pools) == 0 || slices.Contains(e.Pools, n.Pool))
}

var (
	models = []string{"H100", "A100", "L4"}
	pools  = []string{"onprem", "aws"}
)

// genFleet draws 1–20 nodes of 1–8 GPUs of 1–3 models, some GPUs in use,
// some nodes cordoned, CPU and memory sometimes tight.
func genFleet(t *rapid.T) placement.Snapshot {
	nModels := rapid.IntRange(1, len(models)).Draw(t, "models")
	count := rapid.IntRange(1, 20).Draw(t, "nodes")
	s := placement.Snapshot{Now: t0.Add(time.Duration(rapid.IntRange(0, 1e6).Draw(t, "now")) * time.Second)}
	for i := range count {
		id := fmt.Sprintf("n%d", i)
		b := node(id).
			gpus(rapid.IntRange(1, 8).Draw(t, id+".gpus"), rapid.SampledFrom(models[:nModels]).Draw(t, id+".model")).
			pool(rapid.SampledFrom(pools).Draw(t, id+".pool")).
			cpu(int64(rapid.IntRange(0, 32).Draw(t, id+".cpus")) * 1000).
			mem(int64(rapid.IntRange(0, 256).Draw(t, id+".memGiB")) * 1024)
		var used []int
		for g := range b.n.GPUs {
			if rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("%s.used%d", id, g)) == 0 {
				used = append(used, g)
			}
		}
		b.used(used...)
		if rapid.IntRange(0, 4).Draw(t, id+".cordoned") == 0 {
			b.cordoned()
		}
		s.Nodes = append(s.Nodes, b.build())
	}
	return s
}

// genQueue draws 1–30 jobs of 1–4 replicas × 1–8 GPUs, some constrained to
// models or a pool.
func genQueue(t *rapid.T) []gangway.QueueEntry {
	count := rapid.IntRange(1, 30).Draw(t, "jobs")
	var q []gangway.QueueEntry
	for i := range count {
		id := fmt.Sprintf("j%d", i)
		b := job(id).
			gang(rapid.IntRange(1, 4).Draw(t, id+".replicas"), rapid.IntRange(1, 8).Draw(t, id+".gpusPer")).
			cpu(int64(rapid.IntRange(0, 16).Draw(t, id+".cpus")) * 1000).
			mem(int64(rapid.IntRange(0, 64).Draw(t, id+".memGiB")) * 1024).
			attempt(rapid.IntRange(1, 3).Draw(t, id+".attempt"))
		if want := rapid.SliceOfDistinct(rapid.SampledFrom(models), rapid.ID[string]).Draw(t, id+".models"); len(want) > 0 {
			b.models(want...)
		}
		if rapid.Bool().Draw(t, id+".pinned") {
			b.pools(rapid.SampledFrom(pools).Draw(t, id+".pool"))
		}
		q = append(q, b.build())
	}
	return q
}

func cloneSnapshot(s placement.Snapshot) placement.Snapshot {
	c := s
	c.Nodes = slices.Clone(s.Nodes)
	for i := range c.Nodes {
		c.Nodes[i].Free = slices.Clone(s.Nodes[i].Free)
	}
	return c
}

// randomFleet is nodes × gpus GPUs, a mix of models and pools, about a
// quarter of GPUs busy and one node in 50 cordoned.
func randomFleet(r *rand.Rand, nodes, gpus int) placement.Snapshot {
	s := placement.Snapshot{Now: t0}
	for i := range nodes {
		b := node(fmt.Sprintf("n%d", i)).gpus(gpus, models[r.IntN(2)]).pool(pools[r.IntN(len(pools))])
		var used []int
		for g := range gpus {
			if r.IntN(4) == 0 {
				used = append(used, g)
			}
		}
		b.used(used...)
		if r.IntN(50) == 0 {
			b.cordoned()
		}
		s.Nodes = append(s.Nodes, b.build())
	}
	return s
}

// randomQueue is n jobs shaped like a training cluster's: mostly small
// single-replica jobs, some 8-GPU gangs, a few pinned to a model or pool.
func randomQueue(r *rand.Rand, n int) []gangway.QueueEntry {
	var q []gangway.QueueEntry
	for i := range n {
		b := job(fmt.Sprintf("j%d", i)).gang(1+r.IntN(4), []int{1, 2, 4, 8}[r.IntN(4)]).cpu(4000).mem(32 * 1024)
		switch r.IntN(5) {
		case 0:
			b.models(models[r.IntN(2)])
		case 1:
			b.pools(pools[r.IntN(len(pools))])
		}
		q = append(q, b.build())
	}
	return q
}

func BenchmarkPlace(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	s := randomFleet(r, 1000, 8)
	q := randomQueue(r, 2000)
	var plan placement.Plan
	for b.Loop() {
		plan = placement.FirstFit{}.Place(s, q, placement.Options{})
	}
	b.ReportMetric(float64(len(plan.Assignments)), "placed/op")
}
