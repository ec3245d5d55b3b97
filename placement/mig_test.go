package placement_test

import (
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

// TestMIGDevices: a MIG job lands only on a free MIG device of its
// profile; whole-GPU and share jobs never take a MIG device; MIG jobs are
// packed, preempt and are preempted like any job, and count their share of
// the parent GPU against quotas.
func TestMIGDevices(t *testing.T) {
	gangwayPolicy, err := baselines.ScorerByName("gangway")
	if err != nil {
		t.Fatal(err)
	}
	// m1: GPUs 0-1 are 3g.40gb devices, 2-4 1g.10gb devices, 5 whole.
	mixed := func() *nodeBuilder {
		return node("m1").gpus(6, "H100").domain("nvl-m1").mig("3g.40gb", 0, 1).mig("1g.10gb", 2, 3, 4)
	}
	quota := func(n int) placement.Options {
		return placement.Options{Quotas: []placement.Quota{{Team: "ml", Model: "H100", Nominal: n}}}
	}
	runPlaceCases(t, map[string]placeCase{
		"a MIG job takes a device of its profile": {
			fleet:      fleet(mixed()),
			queue:      queue(job("small").mig("1g.10gb"), job("big").mig("3g.40gb")),
			wantPlaced: []gangway.Assignment{placed("big", migOn(0, "m1", "H100", "3g.40gb", 0)), placed("small", migOn(0, "m1", "H100", "1g.10gb", 2))},
		},
		"replicas of a MIG job take a device each": {
			fleet:      fleet(mixed()),
			queue:      queue(job("two").mig("1g.10gb").replicas(2)),
			wantPlaced: []gangway.Assignment{placed("two", migOn(0, "m1", "H100", "1g.10gb", 2), migOn(1, "m1", "H100", "1g.10gb", 3))},
		},
		"a whole-GPU job takes the whole GPU, never a MIG device": {
			fleet:      fleet(mixed()),
			queue:      queue(job("one"), job("two").gang(1, 2)),
			wantPlaced: []gangway.Assignment{placed("one", on(0, "m1", 5))},
			wantUnplaced: []placement.Unplaced{waiting("two", placement.ReasonNeverFits,
				"1 × 2 GPUs: the fleet holds at most 0 such replicas (1 matching node)")},
		},
		"a share never takes a MIG device": {
			fleet:        fleet(mixed().used(5)),
			queue:        queue(job("half").share(500)),
			wantUnplaced: []placement.Unplaced{waiting("half", placement.ReasonInsufficientGPUs, "")},
		},
		"a profile the fleet does not have never fits": {
			fleet: fleet(mixed()),
			queue: queue(job("mid").mig("2g.20gb")),
			wantUnplaced: []placement.Unplaced{waiting("mid", placement.ReasonNeverFits,
				"1 × MIG 2g.20gb: the 1 matching nodes have MIG devices of profile 2g.20gb for at most 0 such replicas")},
		},
		"devices of the profile in use: wait": {
			fleet: fleet(mixed()).with(running("r1").mig("3g.40gb").on("m1", 0), running("r2").mig("3g.40gb").on("m1", 1)),
			queue: queue(job("big").mig("3g.40gb")),
			wantUnplaced: []placement.Unplaced{waiting("big", placement.ReasonInsufficientGPUs,
				"1 × MIG 3g.40gb: needs 1 MIG devices of profile 3g.40gb, 0 free on matching nodes (most on one node 0; of 1 matching nodes, 1 lack the free GPUs, 0 the CPU, 0 the memory)")},
		},
		"an unhealthy MIG device is skipped": {
			fleet:      fleet(mixed().unhealthy(2)),
			queue:      queue(job("small").mig("1g.10gb")),
			wantPlaced: []gangway.Assignment{placed("small", migOn(0, "m1", "H100", "1g.10gb", 3))},
		},
		"the model still applies": {
			fleet:      fleet(node("a1").gpus(2, "A100").mig("1g.10gb", 0, 1), mixed()),
			queue:      queue(job("small").mig("1g.10gb").models("H100")),
			wantPlaced: []gangway.Assignment{placed("small", migOn(0, "m1", "H100", "1g.10gb", 2))},
		},
		"MIG jobs pack onto the node with fewest devices of the profile free": {
			fleet: fleet(node("wide").gpus(7, "H100").mig("1g.10gb", seq(0, 7)...), node("narrow").gpus(2, "H100").mig("1g.10gb", 0, 1)).
				with(running("r1").mig("1g.10gb").on("narrow", 0)),
			queue:      queue(job("small").mig("1g.10gb")),
			opts:       placement.Options{Scorer: gangwayPolicy},
			wantPlaced: []gangway.Assignment{placed("small", migOn(0, "narrow", "H100", "1g.10gb", 1))},
		},
		"a higher-priority MIG job preempts a MIG job on its profile": {
			fleet: fleet(node("n1").gpus(1, "H100").mig("1g.10gb", 0)).
				with(running("low").prio(50).preemptible().mig("1g.10gb").on("n1", 0).started(t0.Add(-time.Hour))),
			queue: queue(job("high").prio(200).mig("1g.10gb")),
			opts:  placement.Options{Preempt: true},
			wantPreempted: []placement.Preemption{{Preemptor: "high", Victims: []placement.Victim{{JobID: "low",
				Reason: "preempted for high (priority 200 > 50)", LostGPUSeconds: 3600 * 142.0 / 1000}}}},
			wantUnplaced: []placement.Unplaced{waiting("high", placement.ReasonPreempting, "")},
		},
		"a whole-GPU job does not preempt a MIG job for its device": {
			fleet: fleet(node("n1").gpus(2, "H100").mig("1g.10gb", 0).used(1)).
				with(running("low").prio(50).preemptible().mig("1g.10gb").on("n1", 0)),
			queue:        queue(job("high").prio(200)),
			opts:         placement.Options{Preempt: true},
			wantUnplaced: []placement.Unplaced{waiting("high", placement.ReasonInsufficientGPUs, "")},
		},
		"quotas count a MIG device as its share of the GPU": {
			fleet: fleet(node("n1").gpus(7, "H100").mig("1g.10gb", seq(0, 7)...), node("n2").gpus(1, "H100")),
			// Seven 1g devices are 7 × 142 = 994 milli-GPU: within one GPU
			// of quota, with no room for a whole GPU after them.
			queue: queue(job("a").mig("1g.10gb").replicas(7), job("b")),
			opts:  quota(1),
			wantPlaced: []gangway.Assignment{placed("a",
				migOn(0, "n1", "H100", "1g.10gb", 0), migOn(1, "n1", "H100", "1g.10gb", 1), migOn(2, "n1", "H100", "1g.10gb", 2),
				migOn(3, "n1", "H100", "1g.10gb", 3), migOn(4, "n1", "H100", "1g.10gb", 4), migOn(5, "n1", "H100", "1g.10gb", 5),
				migOn(6, "n1", "H100", "1g.10gb", 6))},
			wantUnplaced: []placement.Unplaced{waiting("b", placement.ReasonQuota,
				"1 × 1 GPU: team ml uses 1.0/1 GPUs of H100 quota; it is in no cohort to borrow from")},
		},
		"a running MIG job counts its share against quotas": {
			fleet: fleet(node("n1").gpus(1, "H100").mig("3g.40gb", 0), node("n2").gpus(2, "H100")).
				with(running("r").mig("3g.40gb").on("n1", 0)),
			// 428 + 500 fits one GPU; 428 + 500 + 100 does not.
			queue:      queue(job("half").share(500), job("tenth").share(100)),
			opts:       quota(1),
			wantPlaced: []gangway.Assignment{placed("half", shareOn(0, "n2", 500, 0))},
			wantUnplaced: []placement.Unplaced{waiting("tenth", placement.ReasonQuota,
				"1 × 100m GPU share: team ml uses 0.9/1 GPUs of H100 quota; it is in no cohort to borrow from")},
		},
	})
}

// TestMIGReservation: a MIG job blocked behind running MIG jobs reserves
// the device that frees first, and a later MIG job uses it only if it ends
// before.
func TestMIGReservation(t *testing.T) {
	runPlaceCases(t, map[string]placeCase{
		"reserves the device that frees first": {
			fleet: fleet(node("n1").gpus(2, "H100").mig("1g.10gb", 0, 1)).
				with(running("r1").mig("1g.10gb").on("n1", 0).started(t0).runtime(time.Hour)),
			queue: queue(job("gang").mig("1g.10gb").replicas(2).runtime(time.Hour).prio(200),
				job("long").mig("1g.10gb").runtime(2*time.Hour), job("short").mig("1g.10gb").runtime(30*time.Minute)),
			opts:         placement.Options{Reservations: 1},
			wantPlaced:   []gangway.Assignment{placed("short", migOn(0, "n1", "H100", "1g.10gb", 1))},
			wantReserved: []placement.Reservation{{JobID: "gang", Start: t0.Add(time.Hour), Nodes: []string{"n1"}}},
			wantUnplaced: []placement.Unplaced{
				waiting("gang", placement.ReasonReservation, ""),
				waiting("long", placement.ReasonReserved, ""),
			},
		},
	})
}
