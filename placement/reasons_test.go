package placement_test

import (
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// TestReasons pins the reason and the sentence for each way a job can be
// left waiting: what a team lead reads in `gangway why`.
func TestReasons(t *testing.T) {
	eight := func(n int, each func(b *nodeBuilder) *nodeBuilder) *fleetBuilder {
		return fleet(nodes("n", n, func(b *nodeBuilder) *nodeBuilder { return each(b.gpus(8, "H100")) })...)
	}
	asIs := func(b *nodeBuilder) *nodeBuilder { return b }
	runPlaceCases(t, map[string]placeCase{
		"never fits: no node is that large": {
			fleet: eight(2, asIs),
			queue: queue(job("j").gang(1, 16)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonNeverFits,
				"1 × 16 GPUs: the fleet holds at most 0 such replicas (2 matching nodes)")},
		},
		"never fits: more replicas than the fleet holds": {
			fleet: eight(2, asIs),
			queue: queue(job("j").gang(3, 8).models("H100")),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonNeverFits,
				"3 × 8 GPUs (H100): the fleet holds at most 2 such replicas (2 matching nodes)")},
		},
		"never fits: no domain is that large": {
			fleet: eight(4, func(b *nodeBuilder) *nodeBuilder { return b.domain("nvl-" + b.n.ID) }),
			queue: queue(job("j").gang(2, 8).topology(gangway.LevelNVLink, true)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonNeverFits,
				"2 × 8 GPUs: needs 16 GPUs in one nvlink domain; the largest in the fleet has 8")},
		},
		"model unavailable": {
			fleet: fleet(node("h1").gpus(8, "H100"), node("a1").gpus(8, "A100")),
			queue: queue(job("j").models("B200")),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonModelUnavailable,
				"1 × 1 GPU (B200): no node has B200 in any pool; the fleet has A100, H100")},
		},
		"fragmented: enough GPUs, none together": {
			fleet: eight(8, func(b *nodeBuilder) *nodeBuilder { return b.used(0, 1) }),
			queue: queue(job("j").gang(1, 8)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonFragmented,
				"1 × 8 GPUs: 48 GPUs free, but no node has 8 free; largest has 6")},
		},
		"insufficient free GPUs": {
			fleet: eight(2, func(b *nodeBuilder) *nodeBuilder { return b.used(0, 1, 2, 3, 4) }),
			queue: queue(job("j").gang(2, 8)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonInsufficientGPUs,
				"2 × 8 GPUs: needs 16 GPUs, 6 free on matching nodes (largest free block 3 on one node)")},
		},
		"insufficient, behind higher-priority jobs": {
			fleet: eight(2, func(b *nodeBuilder) *nodeBuilder { return b.used(0, 1, 2, 3, 4) }),
			queue: queue(job("first").gang(2, 8).prio(200), job("j").gang(1, 8)),
			wantUnplaced: []placement.Unplaced{
				waiting("first", placement.ReasonInsufficientGPUs, ""),
				waiting("j", placement.ReasonInsufficientGPUs,
					"1 × 8 GPUs: needs 8 GPUs, 6 free on matching nodes (largest free block 3 on one node); behind 1 higher-priority jobs needing 16 GPUs"),
			},
		},
		"insufficient CPU with GPUs free": {
			fleet: fleet(node("n1").gpus(8, "H100").cpu(2000)),
			queue: queue(job("j").cpu(4000)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonNeverFits,
				"1 × 1 GPU: the fleet holds at most 0 such replicas (1 matching node)")},
		},
		"insufficient CPU now": {
			fleet: fleet(node("n1").gpus(8, "H100").cpu(8000).usedCPU(6000)),
			queue: queue(job("j").cpu(4000)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonInsufficientGPUs,
				"1 × 1 GPU: 8 GPUs free, but not with the CPU and memory each replica needs (4000m CPU, 4096 MiB; of 1 matching nodes, 0 lack the free GPUs, 1 the CPU, 0 the memory)")},
		},
		"quota, with numbers": {
			fleet: eight(5, asIs).with(running("r").team("nlp").on("n1", seq(0, 8)...).on("n2", seq(0, 8)...).
				on("n3", seq(0, 8)...).on("n4", seq(0, 8)...)),
			queue: queue(job("j").team("nlp").gang(1, 8).models("H100")),
			opts: placement.Options{Quotas: []placement.Quota{
				{Team: "nlp", Model: "H100", Nominal: 32, Cohort: "research"},
				{Team: "vision", Model: "H100", Nominal: 8, Cohort: "research", LendingLimit: intp(0)},
			}},
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonQuota,
				`1 × 8 GPUs (H100): team nlp uses 32/32 GPUs of H100 quota; cohort "research" has 0 to lend`)},
		},
		"reserved for a blocked gang, and waiting for the reservation": {
			fleet: eight(2, asIs).with(
				running("r1").on("n1", seq(0, 6)...).runtime(2*time.Hour),
				running("r2").on("n2", 0, 1, 2, 3).runtime(4*time.Hour)),
			queue: queue(job("head").gang(2, 8).prio(200), job("j")),
			opts:  placement.Options{Reservations: 1},
			wantUnplaced: []placement.Unplaced{
				waiting("head", placement.ReasonReservation,
					"2 × 8 GPUs: reserved 16 GPUs on n1, n2 from 2025-06-01 15:00:00 UTC (in 3h0m0s, when r1, r2 reach their max runtimes), 6 of them free now; smaller jobs may use them only if they end first"),
				waiting("j", placement.ReasonReserved,
					"1 × 1 GPU: 6 free GPUs are reserved for a blocked larger job that starts before this one would end"),
			},
			wantReserved: []placement.Reservation{{JobID: "head", Start: t0.Add(3 * time.Hour), Nodes: []string{"n1", "n2"}}},
		},
		"waiting for a preemption": {
			fleet: eight(1, asIs).with(running("low").prio(50).preemptible().on("n1", seq(0, 8)...).
				checkpoint(t0.Add(-30 * time.Minute))),
			queue: queue(job("j").gang(1, 8).prio(200)),
			opts:  placement.Options{Preempt: true},
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonPreempting,
				"preempting low (14400 GPU-seconds since their last checkpoints)")},
			wantPreempted: []placement.Preemption{{Preemptor: "j", Victims: []placement.Victim{{
				JobID: "low", Reason: "preempted for j (priority 200 > 50)", LostGPUSeconds: 14400}}}},
		},
	})
}

func TestReasonRetry(t *testing.T) {
	want := map[placement.Reason]bool{
		placement.ReasonInsufficientGPUs: true,
		placement.ReasonFragmented:       true,
		placement.ReasonReserved:         true,
		placement.ReasonReservation:      true,
		placement.ReasonQuota:            true,
		placement.ReasonPreempting:       true,
		placement.ReasonDefragmenting:    true,
		placement.ReasonPlanFull:         true,
		placement.ReasonModelUnavailable: false,
		placement.ReasonNeverFits:        false,
	}
	for _, r := range allReasons {
		if got := r.Retry(); got != want[r] {
			t.Errorf("%s.Retry() = %v, want %v", r, got, want[r])
		}
	}
}
