package placement_test

import (
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// TestQueueOrder pins the order jobs are tried in, read from the order of
// the plan's assignments (when all fit) or from who gets the last GPUs.
func TestQueueOrder(t *testing.T) {
	// 16 GPUs: n1 has one free, r-nlp holds n2's 4 for team nlp, and n3's
	// 4 are used, by the running jobs given or by work outside the queue.
	busy := func(rs ...*runBuilder) *fleetBuilder {
		n3 := node("n3").gpus(4, "H100")
		if len(rs) == 0 {
			n3.used(0, 1, 2, 3)
		}
		return fleet(node("n1").gpus(8, "H100").used(seq(1, 7)...), node("n2").gpus(4, "H100"), n3).
			with(running("r-nlp").team("nlp").on("n2", 0, 1, 2, 3)).with(rs...)
	}
	one := func(id, team string) *jobBuilder { return job(id).team(team) }
	runPlaceCases(t, map[string]placeCase{
		"a higher priority class goes first, however young": {
			fleet:        fleet(node("n1").gpus(1, "H100")),
			queue:        queue(job("old-low").prio(50).age(time.Hour), job("new-high").prio(200)),
			wantPlaced:   []gangway.Assignment{placed("new-high", on(0, "n1", 0))},
			wantUnplaced: []placement.Unplaced{waiting("old-low", placement.ReasonInsufficientGPUs, "")},
		},
		"within a team, the oldest goes first": {
			fleet: fleet(node("n1").gpus(8, "H100")),
			queue: queue(job("young").age(time.Minute), job("old").age(time.Hour), job("middle").age(10*time.Minute)),
			wantPlaced: []gangway.Assignment{
				placed("old", on(0, "n1", 0)), placed("middle", on(0, "n1", 1)), placed("young", on(0, "n1", 2)),
			},
		},
		"a team holding more waits behind one holding less": {
			fleet:        busy(),
			queue:        queue(one("nlp-1", "nlp").age(time.Hour), one("cv-1", "vision")),
			wantPlaced:   []gangway.Assignment{placed("cv-1", on(0, "n1", 0))},
			wantUnplaced: []placement.Unplaced{waiting("nlp-1", placement.ReasonInsufficientGPUs, "")},
		},
		"fair share is recomputed after every placement": {
			fleet: fleet(node("n1").gpus(8, "H100")),
			queue: queue(one("a1", "a"), one("a2", "a"), one("a3", "a"), one("b1", "b"), one("b2", "b")),
			wantPlaced: []gangway.Assignment{
				placed("a1", on(0, "n1", 0)), placed("b1", on(0, "n1", 1)),
				placed("a2", on(0, "n1", 2)), placed("b2", on(0, "n1", 3)),
				placed("a3", on(0, "n1", 4)),
			},
		},
		"a heavier weight lets a team hold more before it yields": {
			// nlp holds 4 of 16 GPUs at weight 4: a weighted share of 1/16,
			// under vision's 2 of 16 at weight 1.
			fleet:        busy(running("r-cv").team("vision").on("n3", 0, 1), running("r-x").team("x").on("n3", 2, 3)),
			queue:        queue(one("cv-1", "vision").age(time.Hour), one("nlp-1", "nlp")),
			opts:         placement.Options{Fairness: placement.Fairness{TeamWeights: map[string]float64{"nlp": 4}}},
			wantPlaced:   []gangway.Assignment{placed("nlp-1", on(0, "n1", 0))},
			wantUnplaced: []placement.Unplaced{waiting("cv-1", placement.ReasonInsufficientGPUs, "")},
		},
		"the dominant resource counts, not only GPUs": {
			// ml holds one GPU but 61 of 192 CPUs: a dominant share of
			// 0.32, above nlp's 4 of 16 GPUs (0.25).
			fleet:        busy(running("r-etl").team("ml").res(60000, 1024).on("n3", 0), running("r-x").team("x").on("n3", 1, 2, 3)),
			queue:        queue(one("ml-1", "ml").age(time.Hour), one("nlp-1", "nlp")),
			wantPlaced:   []gangway.Assignment{placed("nlp-1", on(0, "n1", 0))},
			wantUnplaced: []placement.Unplaced{waiting("ml-1", placement.ReasonInsufficientGPUs, "")},
		},
		"priority beats fair share": {
			fleet:        busy(),
			queue:        queue(one("cv-1", "vision").age(time.Hour), one("nlp-1", "nlp").prio(200)),
			wantPlaced:   []gangway.Assignment{placed("nlp-1", on(0, "n1", 0))},
			wantUnplaced: []placement.Unplaced{waiting("cv-1", placement.ReasonInsufficientGPUs, "")},
		},
		"equal shares: the older head of queue goes first": {
			fleet:        fleet(node("n1").gpus(1, "H100")),
			queue:        queue(one("b-new", "b"), one("a-old", "a").age(time.Minute)),
			wantPlaced:   []gangway.Assignment{placed("a-old", on(0, "n1", 0))},
			wantUnplaced: []placement.Unplaced{waiting("b-new", placement.ReasonInsufficientGPUs, "")},
		},
		"a team's blocked job does not hold back its smaller ones": {
			fleet:        fleet(node("n1").gpus(8, "H100").used(0, 1, 2, 3)),
			queue:        queue(job("big").gang(1, 8).age(time.Hour), job("small").gang(1, 4)),
			wantPlaced:   []gangway.Assignment{placed("small", on(0, "n1", 4, 5, 6, 7))},
			wantUnplaced: []placement.Unplaced{waiting("big", placement.ReasonInsufficientGPUs, "")},
		},
	})
}
