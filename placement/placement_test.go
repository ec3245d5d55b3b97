package placement_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// placeCase is one Place call and the plan it should return. An unplaced
// job whose want has an empty Detail is compared by reason only: the
// reasons tests pin the sentences, the others pin the decisions.
type placeCase struct {
	fleet         *fleetBuilder
	queue         []gangway.QueueEntry
	opts          placement.Options
	wantPlaced    []gangway.Assignment
	wantUnplaced  []placement.Unplaced
	wantPreempted []placement.Preemption
	wantReserved  []placement.Reservation
}

// runPlaceCases runs each case through Place, checks the plan against the
// invariants every plan must keep, and diffs it against the case's wants.
func runPlaceCases(t *testing.T, cases map[string]placeCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			snap := tc.fleet.build()
			got := placement.Place(snap, tc.queue, tc.opts)
			checkPlan(t, snap, tc.queue, tc.opts, got)
			for i := range got.Unplaced {
				if i < len(tc.wantUnplaced) && tc.wantUnplaced[i].Detail == "" {
					got.Unplaced[i].Detail = ""
				}
			}
			opts := cmpopts.EquateEmpty()
			wantPlaced := slices.Clone(tc.wantPlaced)
			for i := range wantPlaced {
				if k := slices.IndexFunc(tc.queue, func(e gangway.QueueEntry) bool { return e.JobID == wantPlaced[i].JobID }); k >= 0 {
					wantPlaced[i] = withEntry(wantPlaced[i], &tc.queue[k])
				}
			}
			if d := cmp.Diff(wantPlaced, got.Assignments, opts); d != "" {
				t.Errorf("assignments (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantUnplaced, got.Unplaced, opts); d != "" {
				t.Errorf("unplaced (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantPreempted, got.Preemptions, opts); d != "" {
				t.Errorf("preemptions (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantReserved, got.Reservations, opts); d != "" {
				t.Errorf("reservations (-want +got):\n%s", d)
			}
		})
	}
}

func TestGangAllOrNothing(t *testing.T) {
	runPlaceCases(t, map[string]placeCase{
		"empty queue": {
			fleet: fleet(node("n1").gpus(8, "H100")),
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
		"gang spans two nodes": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")),
			queue: queue(job("j1").gang(2, 8)),
			wantPlaced: []gangway.Assignment{placed("j1",
				on(0, "n1", seq(0, 8)...), on(1, "n2", seq(0, 8)...))},
		},
		"gang replicas share a node that has room": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")),
			queue: queue(job("j1").gang(2, 4)),
			wantPlaced: []gangway.Assignment{placed("j1",
				on(0, "n1", 0, 1, 2, 3), on(1, "n1", 4, 5, 6, 7))},
		},
		// j1's rank 0 fits on n1 but rank 1 fits nowhere: the half-placed
		// gang must leave n1 entirely free for j2.
		"gang that fits partly leaves no trace": {
			fleet:        fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100").used(0, 1, 2, 3)),
			queue:        queue(job("j1").gang(2, 8), job("j2").gang(1, 8)),
			wantPlaced:   []gangway.Assignment{placed("j2", on(0, "n1", seq(0, 8)...))},
			wantUnplaced: []placement.Unplaced{waiting("j1", placement.ReasonInsufficientGPUs, "")},
		},
		"gang that fits partly leaves its CPU untouched too": {
			fleet:        fleet(node("n1").gpus(8, "H100").cpu(8000), node("n2").gpus(8, "H100").used(0, 1, 2, 3, 4)),
			queue:        queue(job("j1").gang(3, 4).cpu(4000), job("j2").gang(1, 1).cpu(8000)),
			wantPlaced:   []gangway.Assignment{placed("j2", on(0, "n1", 0))},
			wantUnplaced: []placement.Unplaced{waiting("j1", placement.ReasonInsufficientGPUs, "")},
		},
		"jobs take GPUs in queue order": {
			fleet: fleet(node("n1").gpus(8, "H100")),
			queue: queue(job("j1").gang(1, 3), job("j2").gang(1, 3), job("j3").gang(1, 3)),
			wantPlaced: []gangway.Assignment{
				placed("j1", on(0, "n1", 0, 1, 2)),
				placed("j2", on(0, "n1", 3, 4, 5)),
			},
			wantUnplaced: []placement.Unplaced{waiting("j3", placement.ReasonInsufficientGPUs, "")},
		},
		"a blocked gang does not block smaller jobs behind it": {
			fleet:        fleet(node("n1").gpus(8, "H100").used(0)),
			queue:        queue(job("big").gang(1, 8), job("small").gang(1, 2).age(-time.Minute)),
			wantPlaced:   []gangway.Assignment{placed("small", on(0, "n1", 1, 2))},
			wantUnplaced: []placement.Unplaced{waiting("big", placement.ReasonInsufficientGPUs, "")},
		},
		"attempt is carried into the assignment": {
			fleet: fleet(node("n1").gpus(8, "H100")),
			queue: queue(job("j1").attempt(3)),
			wantPlaced: []gangway.Assignment{{JobID: "j1", Attempt: 3, At: t0,
				Members: []gangway.Member{on(0, "n1", 0)}}},
		},
		"the plan stops at MaxAssignments": {
			fleet:      fleet(node("n1").gpus(8, "H100")),
			queue:      queue(job("j1"), job("j2"), job("j3")),
			opts:       placement.Options{MaxAssignments: 2},
			wantPlaced: []gangway.Assignment{placed("j1", on(0, "n1", 0)), placed("j2", on(0, "n1", 1))},
			wantUnplaced: []placement.Unplaced{waiting("j3", placement.ReasonPlanFull,
				"this cycle already starts 2 jobs")},
		},
	})
}

func TestGPUShares(t *testing.T) {
	runPlaceCases(t, map[string]placeCase{
		"shares pack onto one GPU": {
			fleet: fleet(node("n1").gpus(2, "T4")),
			queue: queue(job("s1").share(300), job("s2").share(300), job("s3").share(300), job("s4").share(300)),
			wantPlaced: []gangway.Assignment{
				placed("s1", shareOn(0, "n1", 300, 0)),
				placed("s2", shareOn(0, "n1", 300, 0)),
				placed("s3", shareOn(0, "n1", 300, 0)),
				placed("s4", shareOn(0, "n1", 300, 1)), // 100m left on GPU 0
			},
		},
		"a share never takes a GPU past 1000 milli": {
			fleet:      fleet(node("n1").gpus(2, "T4").usedMilli(0, 800)),
			queue:      queue(job("s1").share(300)),
			wantPlaced: []gangway.Assignment{placed("s1", shareOn(0, "n1", 300, 1))},
		},
		"a share fills a GPU exactly": {
			fleet:      fleet(node("n1").gpus(1, "T4").usedMilli(0, 750)),
			queue:      queue(job("s1").share(250), job("s2").share(1)),
			wantPlaced: []gangway.Assignment{placed("s1", shareOn(0, "n1", 250, 0))},
			wantUnplaced: []placement.Unplaced{waiting("s2", placement.ReasonInsufficientGPUs,
				"1 × 1m GPU share: 0 milli-GPU free on matching nodes, none with room for the task's GPU share, CPU and memory (of 1 matching nodes, 1 lack the free GPUs, 0 the CPU, 0 the memory)")},
		},
		"replicas of a shared job may share a GPU": {
			fleet: fleet(node("n1").gpus(2, "T4")),
			queue: queue(job("s1").share(500).replicas(3)),
			wantPlaced: []gangway.Assignment{placed("s1",
				shareOn(0, "n1", 500, 0), shareOn(1, "n1", 500, 0), shareOn(2, "n1", 500, 1))},
		},
		"a whole-GPU job skips a GPU that runs shares": {
			fleet:      fleet(node("n1").gpus(2, "T4").usedMilli(0, 100)),
			queue:      queue(job("j1")),
			wantPlaced: []gangway.Assignment{placed("j1", on(0, "n1", 1))},
		},
		"shares of running jobs count against the GPU": {
			fleet: fleet(node("n1").gpus(1, "T4")).
				with(running("r1").share(600).on("n1", 0)),
			queue:        queue(job("s1").share(500), job("s2").share(400)),
			wantPlaced:   []gangway.Assignment{placed("s2", shareOn(0, "n1", 400, 0))},
			wantUnplaced: []placement.Unplaced{waiting("s1", placement.ReasonInsufficientGPUs, "")},
		},
		"a share skips an unhealthy GPU": {
			fleet:      fleet(node("n1").gpus(2, "T4").unhealthy(0)),
			queue:      queue(job("s1").share(100)),
			wantPlaced: []gangway.Assignment{placed("s1", shareOn(0, "n1", 100, 1))},
		},
	})
}

func TestCPUOnlyTasks(t *testing.T) {
	runPlaceCases(t, map[string]placeCase{
		"a CPU-only task runs on a node without GPUs": {
			fleet:      fleet(node("c1")),
			queue:      queue(job("c").cpuOnly()),
			wantPlaced: []gangway.Assignment{placed("c", cpuOn(0, "c1"))},
		},
		"a CPU-only task goes where the CPU is": {
			fleet:      fleet(node("c1").cpu(4000).usedCPU(2000), node("c2").cpu(4000)),
			queue:      queue(job("c").cpuOnly().cpu(3000)),
			wantPlaced: []gangway.Assignment{placed("c", cpuOn(0, "c2"))},
		},
		"a CPU-only task takes no GPU": {
			fleet: fleet(node("n1").gpus(8, "H100")),
			queue: queue(job("c").cpuOnly(), job("j1").gang(1, 8).age(-time.Minute)),
			wantPlaced: []gangway.Assignment{
				placed("c", cpuOn(0, "n1")),
				placed("j1", on(0, "n1", seq(0, 8)...)),
			},
		},
		"CPU-only replicas spread when one node's memory runs out": {
			fleet: fleet(node("c1").mem(10000), node("c2").mem(10000)),
			queue: queue(job("c").cpuOnly().replicas(4).mem(4096)),
			wantPlaced: []gangway.Assignment{placed("c",
				cpuOn(0, "c1"), cpuOn(1, "c1"), cpuOn(2, "c2"), cpuOn(3, "c2"))},
		},
		"a CPU-only task too big for any node never fits": {
			fleet:        fleet(node("c1").cpu(4000)),
			queue:        queue(job("c").cpuOnly().cpu(8000)),
			wantUnplaced: []placement.Unplaced{waiting("c", placement.ReasonNeverFits, "")},
		},
	})
}

func TestModelAndPoolConstraints(t *testing.T) {
	mixed := func() *fleetBuilder {
		return fleet(
			node("h1").gpus(8, "H100"),
			node("a1").gpus(8, "A100").pool("cloud"),
			node("l1").gpus(4, "L4").pool("cloud"),
		)
	}
	runPlaceCases(t, map[string]placeCase{
		"an allowed model is found past others": {
			fleet:      mixed(),
			queue:      queue(job("j").models("A100")),
			wantPlaced: []gangway.Assignment{placed("j", inPool(on(0, "a1", 0), "cloud"))},
		},
		"any of several models": {
			fleet:      fleet(node("h1").gpus(8, "H100").used(seq(0, 8)...), node("a1").gpus(8, "A100").pool("cloud")),
			queue:      queue(job("j").models("L4", "A100", "H100")),
			wantPlaced: []gangway.Assignment{placed("j", inPool(on(0, "a1", 0), "cloud"))},
		},
		"a pool constraint": {
			fleet:      mixed(),
			queue:      queue(job("j").pools("cloud")),
			wantPlaced: []gangway.Assignment{placed("j", inPool(on(0, "a1", 0), "cloud"))},
		},
		"model and pool together": {
			fleet:      mixed(),
			queue:      queue(job("j").models("L4").pools("cloud")),
			wantPlaced: []gangway.Assignment{placed("j", inPool(on(0, "l1", 0), "cloud"))},
		},
		"a model nobody has": {
			fleet:        mixed(),
			queue:        queue(job("j").models("B200")),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonModelUnavailable, "")},
		},
		"a model not in the allowed pool": {
			fleet:        mixed(),
			queue:        queue(job("j").models("H100").pools("cloud")),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonModelUnavailable, "")},
		},
		"a gang replica larger than any node of the model never fits": {
			fleet:        mixed(),
			queue:        queue(job("j").gang(1, 8).models("L4")),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonNeverFits, "")},
		},
	})
}

func TestNodeHealth(t *testing.T) {
	runPlaceCases(t, map[string]placeCase{
		"cordoned nodes get no work": {
			fleet:      fleet(node("n1").gpus(8, "H100").cordoned(), node("n2").gpus(8, "H100")),
			queue:      queue(job("j")),
			wantPlaced: []gangway.Assignment{placed("j", on(0, "n2", 0))},
		},
		"unhealthy GPUs are skipped": {
			fleet:      fleet(node("n1").gpus(8, "H100").unhealthy(0, 2)),
			queue:      queue(job("j").gang(1, 3)),
			wantPlaced: []gangway.Assignment{placed("j", on(0, "n1", 1, 3, 4))},
		},
		"a node short of memory is skipped": {
			fleet:      fleet(node("n1").gpus(8, "H100").mem(2048), node("n2").gpus(8, "H100")),
			queue:      queue(job("j")),
			wantPlaced: []gangway.Assignment{placed("j", on(0, "n2", 0))},
		},
		// A cordoned node may come back: the job waits rather than fails.
		"only a cordoned node could hold it": {
			fleet:        fleet(node("n1").gpus(8, "H100").cordoned(), node("n2").gpus(4, "H100")),
			queue:        queue(job("j").gang(1, 8)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonInsufficientGPUs, "")},
		},
	})
}
