package placement_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

func TestPreemption(t *testing.T) {
	on1 := func(r *runBuilder) *fleetBuilder { return fleet(node("n1").gpus(8, "H100")).with(r) }
	low := func(id string) *runBuilder { return running(id).prio(50).preemptible() }
	hi := func() *jobBuilder { return job("hi").gang(1, 8).prio(200) }
	preempt := placement.Options{Preempt: true}
	victim := func(id string, prio int, lost float64) placement.Victim {
		return placement.Victim{JobID: id, Reason: "preempted for hi (priority 200 > " + itoa(prio) + ")", LostGPUSeconds: lost}
	}
	preempting := func(detail string) []placement.Unplaced {
		return []placement.Unplaced{waiting("hi", placement.ReasonPreempting, detail)}
	}
	waits := func(r placement.Reason) []placement.Unplaced { return []placement.Unplaced{waiting("hi", r, "")} }
	runPlaceCases(t, map[string]placeCase{
		"a lower-priority preemptible job makes room": {
			fleet: on1(low("low").on("n1", seq(0, 8)...)),
			queue: queue(hi()),
			opts:  preempt,
			wantPreempted: []placement.Preemption{{Preemptor: "hi",
				Victims: []placement.Victim{victim("low", 50, 8*3600)}}},
			wantUnplaced: preempting("preempting low (28800 GPU-seconds since their last checkpoints)"),
		},
		"nothing is preempted unless asked": {
			fleet:        on1(low("low").on("n1", seq(0, 8)...)),
			queue:        queue(hi()),
			wantUnplaced: waits(placement.ReasonInsufficientGPUs),
		},
		"never a job that is not preemptible": {
			fleet:        on1(running("low").prio(50).on("n1", seq(0, 8)...)),
			queue:        queue(hi()),
			opts:         preempt,
			wantUnplaced: waits(placement.ReasonInsufficientGPUs),
		},
		"never a job of equal priority": {
			fleet:        on1(low("peer").prio(200).on("n1", seq(0, 8)...)),
			queue:        queue(hi()),
			opts:         preempt,
			wantUnplaced: waits(placement.ReasonInsufficientGPUs),
		},
		"MinRuntime protects a fresh job": {
			fleet:        on1(low("fresh").started(t0.Add(-5*time.Minute)).on("n1", seq(0, 8)...)),
			queue:        queue(hi()),
			opts:         placement.Options{Preempt: true, MinRuntime: 10 * time.Minute},
			wantUnplaced: waits(placement.ReasonInsufficientGPUs),
		},
		"MinRuntime passed": {
			fleet: on1(low("older").started(t0.Add(-20*time.Minute)).on("n1", seq(0, 8)...)),
			queue: queue(hi()),
			opts:  placement.Options{Preempt: true, MinRuntime: 10 * time.Minute},
			wantPreempted: []placement.Preemption{{Preemptor: "hi",
				Victims: []placement.Victim{victim("older", 50, 8*1200)}}},
			wantUnplaced: preempting(""),
		},
		"the victim with the least work since its checkpoint": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).with(
				low("stale").on("n1", seq(0, 8)...).checkpoint(t0.Add(-50*time.Minute)),
				low("fresh-ckpt").on("n2", seq(0, 8)...).checkpoint(t0.Add(-5*time.Minute))),
			queue: queue(hi()),
			opts:  preempt,
			wantPreempted: []placement.Preemption{{Preemptor: "hi",
				Victims: []placement.Victim{victim("fresh-ckpt", 50, 8*300)}}},
			wantUnplaced: preempting("preempting fresh-ckpt (2400 GPU-seconds since their last checkpoints)"),
		},
		"the lowest priority first": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).with(
				low("p80").prio(80).on("n1", seq(0, 8)...).checkpoint(t0.Add(-5*time.Minute)),
				low("p50").on("n2", seq(0, 8)...)),
			queue: queue(hi()),
			opts:  preempt,
			wantPreempted: []placement.Preemption{{Preemptor: "hi",
				Victims: []placement.Victim{victim("p50", 50, 8*3600)}}},
			wantUnplaced: preempting(""),
		},
		"victims that would not help are not stopped": {
			// small is cheapest but n1 stays 7 GPUs short without it.
			fleet: fleet(node("n1").gpus(8, "H100").used(seq(1, 7)...), node("n2").gpus(8, "H100")).with(
				low("small").on("n1", 0).checkpoint(t0.Add(-time.Minute)),
				low("big").on("n2", seq(0, 8)...)),
			queue: queue(hi()),
			opts:  preempt,
			wantPreempted: []placement.Preemption{{Preemptor: "hi",
				Victims: []placement.Victim{victim("big", 50, 8*3600)}}},
			wantUnplaced: preempting(""),
		},
		"several victims when one is not enough": {
			fleet: fleet(node("n1").gpus(8, "H100")).with(
				low("a").on("n1", 0, 1, 2, 3), low("b").on("n1", 4, 5, 6, 7)),
			queue: queue(hi()),
			opts:  preempt,
			wantPreempted: []placement.Preemption{{Preemptor: "hi",
				Victims: []placement.Victim{victim("a", 50, 4*3600), victim("b", 50, 4*3600)}}},
			wantUnplaced: preempting("preempting a, b (28800 GPU-seconds since their last checkpoints)"),
		},
		"the preemptor's quota is held for it": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).with(
				low("low").team("vision").on("n1", seq(0, 8)...),
				running("own").team("nlp").on("n2", seq(0, 7)...)),
			queue: queue(job("hi").team("nlp").gang(1, 8).prio(200), job("mid").team("nlp").prio(100)),
			opts: placement.Options{Preempt: true, Quotas: []placement.Quota{
				{Team: "nlp", Model: "H100", Nominal: 15}, {Team: "vision", Model: "H100", Nominal: 8}}},
			wantPreempted: []placement.Preemption{{Preemptor: "hi",
				Victims: []placement.Victim{victim("low", 50, 8*3600)}}},
			wantUnplaced: []placement.Unplaced{waiting("hi", placement.ReasonPreempting, ""),
				waiting("mid", placement.ReasonQuota,
					"1 × 1 GPU: team nlp uses 15/15 GPUs of H100 quota; it is in no cohort to borrow from")},
		},
		"a share's lost work is its share of the GPU": {
			fleet: fleet(node("n1").gpus(1, "T4")).with(low("s").share(500).on("n1", 0)),
			queue: queue(job("hi").prio(200)),
			opts:  preempt,
			wantPreempted: []placement.Preemption{{Preemptor: "hi",
				Victims: []placement.Victim{victim("s", 50, 1800)}}},
			wantUnplaced: preempting(""),
		},
		"never unless the preemptor fits afterwards": {
			fleet:        fleet(node("n1").gpus(8, "H100").used(0, 1, 2, 3)).with(low("low").on("n1", 4, 5, 6, 7)),
			queue:        queue(hi()),
			opts:         preempt,
			wantUnplaced: waits(placement.ReasonInsufficientGPUs),
		},
		"a victim is stopped for one preemptor only": {
			fleet: on1(low("low").on("n1", seq(0, 8)...)),
			queue: queue(hi(), job("hi2").gang(1, 8).prio(200).age(-time.Minute)),
			opts:  preempt,
			wantPreempted: []placement.Preemption{{Preemptor: "hi",
				Victims: []placement.Victim{victim("low", 50, 8*3600)}}},
			wantUnplaced: []placement.Unplaced{waiting("hi", placement.ReasonPreempting, ""),
				waiting("hi2", placement.ReasonInsufficientGPUs, "")},
		},
		// Once low stops, hi needs n1's free half too: mid, placed later in
		// the same plan, must not take it.
		"what the preemptor needs besides its victims' GPUs is held for it": {
			fleet: fleet(node("n1").gpus(8, "H100")).with(low("low").on("n1", 0, 1, 2, 3)),
			queue: queue(hi(), job("mid").gang(1, 4).prio(100)),
			opts:  preempt,
			wantPreempted: []placement.Preemption{{Preemptor: "hi",
				Victims: []placement.Victim{victim("low", 50, 4*3600)}}},
			wantUnplaced: []placement.Unplaced{waiting("hi", placement.ReasonPreempting, ""),
				waiting("mid", placement.ReasonInsufficientGPUs, "")},
		},
	})
}

// TestPreemptionReclaimsLentQuota covers preemption to take back quota a
// team lent: its borrowers' jobs go before other teams' lower-priority
// jobs, and only while the reclaiming team stays within its nominal quota.
func TestPreemptionReclaimsLentQuota(t *testing.T) {
	// nlp and vision each hold 8 nominal H100 in cohort research; vision
	// runs 16, so it borrows nlp's 8. infra (no quota) runs a
	// lower-priority job on n3.
	cohort := []placement.Quota{
		{Team: "nlp", Model: "H100", Nominal: 8, Cohort: "research"},
		{Team: "vision", Model: "H100", Nominal: 8, Cohort: "research"},
	}
	lent := func() *fleetBuilder {
		return fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100"), node("n3").gpus(8, "H100")).with(
			running("v1").team("vision").preemptible().on("n1", seq(0, 8)...),
			running("v2").team("vision").preemptible().on("n2", seq(0, 8)...).checkpoint(t0.Add(-10*time.Minute)),
			running("i1").team("infra").prio(50).preemptible().on("n3", seq(0, 8)...),
		)
	}
	runPlaceCases(t, map[string]placeCase{
		"the borrower goes before a lower-priority owner": {
			fleet: lent(),
			queue: queue(job("j").team("nlp").gang(1, 8)),
			opts:  placement.Options{Preempt: true, Quotas: cohort},
			wantPreempted: []placement.Preemption{{Preemptor: "j", Victims: []placement.Victim{{
				JobID: "v2", Reason: "team nlp reclaims the quota team vision borrowed, for j", LostGPUSeconds: 8 * 600}}}},
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonPreempting,
				"preempting v2 (4800 GPU-seconds since their last checkpoints)")},
		},
		"no reclaim past the reclaimer's nominal quota": {
			fleet: lent().with(running("n-own").team("nlp").on("n3")),
			queue: queue(job("j").team("nlp").gang(2, 8)),
			opts:  placement.Options{Preempt: true, Quotas: cohort},
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonQuota,
				`2 × 8 GPUs: team nlp uses 0/8 GPUs of H100 quota; cohort "research" has 0 to lend`)},
		},
		"without quotas an equal-priority job is safe": {
			fleet:        lent(),
			queue:        queue(job("j").team("nlp").gang(1, 8).prio(50)),
			opts:         placement.Options{Preempt: true},
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonInsufficientGPUs, "")},
		},
		// vision's job is older, so fair share tries it first and it
		// borrows nlp's idle quota. nlp's job then may not preempt what
		// this very plan starts.
		"a job this plan starts is never a victim": {
			fleet: fleet(node("n1").gpus(8, "H100")),
			queue: queue(job("v").team("vision").gang(1, 8).preemptible().age(time.Minute), job("j").team("nlp").gang(1, 8)),
			opts: placement.Options{Preempt: true, Quotas: []placement.Quota{
				{Team: "nlp", Model: "H100", Nominal: 8, Cohort: "research"},
				{Team: "vision", Model: "H100", Nominal: 0, Cohort: "research"},
			}},
			wantPlaced:   []gangway.Assignment{placed("v", on(0, "n1", seq(0, 8)...))},
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonInsufficientGPUs, "")},
		},
	})
}

// TestSessionReleasesHeldCapacity: what a preemptor holds is held for the
// rest of its Place call only; the next call sees it free again.
func TestSessionReleasesHeldCapacity(t *testing.T) {
	snap := fleet(node("n1").gpus(8, "H100")).
		with(running("low").prio(50).preemptible().on("n1", 0, 1, 2, 3)).build()
	se := placement.NewSession(snap, placement.Options{Preempt: true})
	first := se.Place(queue(job("hi").gang(1, 8).prio(200), job("mid").gang(1, 4).prio(100)))
	if len(first.Preemptions) != 1 || len(first.Assignments) != 0 {
		t.Fatalf("first call: want hi to preempt and mid to wait, got %+v", first)
	}
	q := queue(job("mid").gang(1, 4).prio(100))
	second := se.Place(q)
	want := []gangway.Assignment{withEntry(placed("mid", on(0, "n1", 4, 5, 6, 7)), &q[0])}
	if d := cmp.Diff(want, second.Assignments); d != "" {
		t.Errorf("second call (-want +got):\n%s", d)
	}
}

func itoa(i int) string { return fmt.Sprint(i) }
