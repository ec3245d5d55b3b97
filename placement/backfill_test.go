package placement_test

import (
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// TestBackfill covers reservations for a blocked head-of-line gang and the
// smaller jobs that may, or may not, use the GPUs held for it.
func TestBackfill(t *testing.T) {
	// Two 8-GPU nodes: r1 holds 6 GPUs of n1 until t0+1h, r2 4 of n2 until
	// t0+3h. 6 GPUs are free now; the 2 × 8 gang fits once both end.
	cluster := func(extra ...*nodeBuilder) *fleetBuilder {
		return fleet(append([]*nodeBuilder{node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")}, extra...)...).
			with(
				running("r1").on("n1", seq(0, 6)...).started(t0.Add(-time.Hour)).runtime(2*time.Hour),
				running("r2").on("n2", 0, 1, 2, 3).started(t0.Add(-time.Hour)).runtime(4*time.Hour),
			)
	}
	head := func() *jobBuilder { return job("head").gang(2, 8).prio(200) }
	res := placement.Reservation{JobID: "head", Start: t0.Add(3 * time.Hour), Nodes: []string{"n1", "n2"}}
	headWaits := waiting("head", placement.ReasonReservation,
		"2 × 8 GPUs: reserved 16 GPUs on n1, n2 from 2025-06-01 15:00:00 UTC (in 3h0m0s, when r1, r2 reach their max runtimes), 6 of them free now; smaller jobs may use them only if they end first")
	runPlaceCases(t, map[string]placeCase{
		"the blocked gang reserves for when running jobs end": {
			fleet:        cluster(),
			queue:        queue(head()),
			opts:         placement.Options{Reservations: 1},
			wantUnplaced: []placement.Unplaced{headWaits},
			wantReserved: []placement.Reservation{res},
		},
		"a short job backfills": {
			fleet:        cluster(),
			queue:        queue(head(), job("short").runtime(time.Hour)),
			opts:         placement.Options{Reservations: 1},
			wantPlaced:   []gangway.Assignment{placed("short", on(0, "n1", 6))},
			wantUnplaced: []placement.Unplaced{headWaits},
			wantReserved: []placement.Reservation{res},
		},
		"a job ending exactly at the start backfills": {
			fleet:        cluster(),
			queue:        queue(head(), job("exact").gang(1, 2).runtime(3*time.Hour)),
			opts:         placement.Options{Reservations: 1},
			wantPlaced:   []gangway.Assignment{placed("exact", on(0, "n1", 6, 7))},
			wantUnplaced: []placement.Unplaced{headWaits},
			wantReserved: []placement.Reservation{res},
		},
		"a long job may not delay the gang": {
			fleet: cluster(),
			queue: queue(head(), job("long").runtime(4*time.Hour)),
			opts:  placement.Options{Reservations: 1},
			wantUnplaced: []placement.Unplaced{headWaits, waiting("long", placement.ReasonReserved,
				"1 × 1 GPU: 6 free GPUs are reserved for a blocked larger job that starts before this one would end")},
			wantReserved: []placement.Reservation{res},
		},
		"a job without a max runtime may not use reserved GPUs": {
			fleet:        cluster(),
			queue:        queue(head(), job("open-ended")),
			opts:         placement.Options{Reservations: 1},
			wantUnplaced: []placement.Unplaced{headWaits, waiting("open-ended", placement.ReasonReserved, "")},
			wantReserved: []placement.Reservation{res},
		},
		"a long job uses GPUs nobody reserved": {
			fleet:        cluster(node("n3").gpus(8, "H100").used(seq(1, 7)...)),
			queue:        queue(head(), job("long").runtime(4*time.Hour)),
			opts:         placement.Options{Reservations: 1},
			wantPlaced:   []gangway.Assignment{placed("long", on(0, "n3", 0))},
			wantUnplaced: []placement.Unplaced{headWaits},
			wantReserved: []placement.Reservation{res},
		},
		"without reservations small jobs jump ahead": {
			fleet:        cluster(),
			queue:        queue(head(), job("long").runtime(4*time.Hour)),
			wantPlaced:   []gangway.Assignment{placed("long", on(0, "n1", 6))},
			wantUnplaced: []placement.Unplaced{waiting("head", placement.ReasonInsufficientGPUs, "")},
		},
		"a reservation at the earliest moment the gang fits": {
			// 1 × 8 fits on n1 once r1 ends, two hours before n2 frees up.
			fleet: cluster(),
			queue: queue(job("head").gang(1, 8).prio(200), job("long").runtime(4*time.Hour)),
			opts:  placement.Options{Reservations: 1},
			wantUnplaced: []placement.Unplaced{
				waiting("head", placement.ReasonReservation,
					"1 × 8 GPUs: reserved 8 GPUs on n1 from 2025-06-01 13:00:00 UTC (in 1h0m0s, when r1 reaches its max runtime), 2 of them free now; smaller jobs may use them only if they end first"),
			},
			wantPlaced:   []gangway.Assignment{placed("long", on(0, "n2", 4))},
			wantReserved: []placement.Reservation{{JobID: "head", Start: t0.Add(time.Hour), Nodes: []string{"n1"}}},
		},
		"only as many reservations as asked": {
			fleet: cluster(),
			queue: queue(head(), job("second").gang(2, 8).prio(150)),
			opts:  placement.Options{Reservations: 1},
			wantUnplaced: []placement.Unplaced{headWaits,
				waiting("second", placement.ReasonInsufficientGPUs, "")},
			wantReserved: []placement.Reservation{res},
		},
		"a second reservation does not count on GPUs the first holds": {
			// head1 gets n1 when r1 ends in an hour; head2 must wait for n2.
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).with(
				running("r1").on("n1", seq(0, 8)...).started(t0).runtime(time.Hour),
				running("r2").on("n2", seq(0, 7)...).started(t0).runtime(3*time.Hour)),
			queue: queue(job("head1").gang(1, 8).prio(200).runtime(10*time.Hour),
				job("head2").gang(1, 8).prio(150).runtime(10*time.Hour)),
			opts: placement.Options{Reservations: 2},
			wantUnplaced: []placement.Unplaced{
				waiting("head1", placement.ReasonReservation, ""),
				waiting("head2", placement.ReasonReservation,
					"1 × 8 GPUs: reserved 8 GPUs on n2 from 2025-06-01 15:00:00 UTC (in 3h0m0s, when r1, r2 reach their max runtimes), 1 of them free now; smaller jobs may use them only if they end first"),
			},
			wantReserved: []placement.Reservation{
				{JobID: "head1", Start: t0.Add(time.Hour), Nodes: []string{"n1"}},
				{JobID: "head2", Start: t0.Add(3 * time.Hour), Nodes: []string{"n2"}},
			},
		},
		"running jobs without a max runtime give no start time": {
			fleet:        fleet(node("n1").gpus(8, "H100")).with(running("forever").on("n1", 0)),
			queue:        queue(job("head").gang(1, 8)),
			opts:         placement.Options{Reservations: 1},
			wantUnplaced: []placement.Unplaced{waiting("head", placement.ReasonInsufficientGPUs, "")},
		},
		"an overdue job is expected any moment": {
			fleet: fleet(node("n1").gpus(8, "H100")).
				with(running("late").on("n1", 0).started(t0.Add(-3 * time.Hour)).runtime(time.Hour)),
			queue: queue(job("head").gang(1, 8)),
			opts:  placement.Options{Reservations: 1},
			wantUnplaced: []placement.Unplaced{waiting("head", placement.ReasonReservation,
				"1 × 8 GPUs: reserved 8 GPUs on n1 from 2025-06-01 12:00:00 UTC (in 0s, when late reaches its max runtime), 7 of them free now; smaller jobs may use them only if they end first")},
			wantReserved: []placement.Reservation{{JobID: "head", Start: t0, Nodes: []string{"n1"}}},
		},
	})
}

// TestSessionReservationsDoNotOutliveTheirCall places twice on one
// session: a reservation made by the first call must not keep later calls
// from using the GPUs once the blocked job is gone from the queue.
func TestSessionReservationsDoNotOutliveTheirCall(t *testing.T) {
	snap := fleet(node("n1").gpus(8, "H100")).
		with(running("r1").on("n1", 0).runtime(2 * time.Hour)).build()
	se := placement.NewSession(snap, placement.Options{Reservations: 1})
	first := se.Place(queue(job("head").gang(1, 8)))
	if len(first.Reservations) != 1 {
		t.Fatalf("first call: want a reservation, got %+v", first)
	}
	se.SetNow(t0.Add(3 * time.Hour))
	second := se.Place(queue(job("later").gang(1, 4).runtime(5 * time.Hour)))
	if len(second.Assignments) != 1 {
		t.Errorf("second call: later not placed: %+v", second.Unplaced)
	}
}
