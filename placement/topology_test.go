package placement_test

import (
	"testing"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// TestTopologyNVLink covers NVLink domains inside a node (two domains of
// four GPUs) and rack-scale domains that span nodes.
func TestTopologyNVLink(t *testing.T) {
	// n1: domain nvl-0 is GPUs 0-3 with 0 and 1 used (2 free); nvl-1 is
	// GPUs 4-7 with 4 used (3 free).
	split := func() *fleetBuilder {
		return fleet(node("n1").gpus(8, "H100").domain("nvl-0", 0, 1, 2, 3).domain("nvl-1", 4, 5, 6, 7).used(0, 1, 4))
	}
	// Two rack-scale domains of two nodes each; a1 has half its GPUs used.
	racks := func() *fleetBuilder {
		return fleet(
			node("a1").gpus(8, "GB200").domain("nvl72-a").rack("ra").used(0, 1, 2, 3),
			node("a2").gpus(8, "GB200").domain("nvl72-a").rack("ra"),
			node("b1").gpus(8, "GB200").domain("nvl72-b").rack("rb"),
			node("b2").gpus(8, "GB200").domain("nvl72-b").rack("rb"),
		)
	}
	runPlaceCases(t, map[string]placeCase{
		"required: the replica stays in the domain that holds it": {
			fleet:      split(),
			queue:      queue(job("j").gang(1, 3).topology(gangway.LevelNVLink, true)),
			wantPlaced: []gangway.Assignment{placed("j", on(0, "n1", 5, 6, 7))},
		},
		"required: no domain holds it, though the node does": {
			fleet: split(),
			queue: queue(job("j").gang(1, 4).topology(gangway.LevelNVLink, true)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonFragmented,
				"1 × 4 GPUs: 5 GPUs free, but no nvlink domain has 4 free together")},
		},
		"preferred: spreads over domains when none holds it": {
			fleet:      split(),
			queue:      queue(job("j").gang(1, 4).topology(gangway.LevelNVLink, false)),
			wantPlaced: []gangway.Assignment{placed("j", on(0, "n1", 2, 5, 6, 7))},
		},
		"required: a gang's replicas share one domain": {
			fleet:      split(),
			queue:      queue(job("j").gang(3, 1).topology(gangway.LevelNVLink, true)),
			wantPlaced: []gangway.Assignment{placed("j", on(0, "n1", 5), on(1, "n1", 6), on(2, "n1", 7))},
		},
		"without topology a small request still keeps to one domain": {
			fleet:      split(),
			queue:      queue(job("j").gang(1, 2)),
			wantPlaced: []gangway.Assignment{placed("j", on(0, "n1", 2, 3))},
		},
		"required: a rack-scale domain spans nodes": {
			fleet: racks(),
			queue: queue(job("j").gang(2, 8).topology(gangway.LevelNVLink, true)),
			wantPlaced: []gangway.Assignment{placed("j",
				on(0, "b1", seq(0, 8)...), on(1, "b2", seq(0, 8)...))},
		},
		"without topology the gang straddles domains": {
			fleet: racks(),
			queue: queue(job("j").gang(2, 8)),
			wantPlaced: []gangway.Assignment{placed("j",
				on(0, "a2", seq(0, 8)...), on(1, "b1", seq(0, 8)...))},
		},
		"preferred: kept in one domain when one holds it": {
			fleet: racks(),
			queue: queue(job("j").gang(2, 8).topology(gangway.LevelNVLink, false)),
			wantPlaced: []gangway.Assignment{placed("j",
				on(0, "b1", seq(0, 8)...), on(1, "b2", seq(0, 8)...))},
		},
		// The 12 free GPUs of nvl72-a hold a 3 × 4 gang; nvl72-b stays
		// whole for a larger one.
		"required: the tightest domain that holds the gang": {
			fleet: racks(),
			queue: queue(job("j").gang(3, 4).topology(gangway.LevelNVLink, true)),
			wantPlaced: []gangway.Assignment{placed("j",
				on(0, "a1", 4, 5, 6, 7), on(1, "a2", 0, 1, 2, 3), on(2, "a2", 4, 5, 6, 7))},
		},
		"required: shares pack into a partly used domain": {
			fleet:      fleet(node("n1").gpus(2, "T4").domain("nvl-0").usedMilli(0, 500).usedMilli(1, 500)),
			queue:      queue(job("s").share(250).replicas(2).topology(gangway.LevelNVLink, true)),
			wantPlaced: []gangway.Assignment{placed("s", shareOn(0, "n1", 250, 0), shareOn(1, "n1", 250, 0))},
		},
		"required: shares of one GPU fit a single-GPU domain": {
			fleet:      fleet(node("n1").gpus(1, "T4")),
			queue:      queue(job("s").share(300).replicas(3).topology(gangway.LevelNVLink, true)),
			wantPlaced: []gangway.Assignment{placed("s", shareOn(0, "n1", 300, 0), shareOn(1, "n1", 300, 0), shareOn(2, "n1", 300, 0))},
		},
		"required: larger than any domain never fits": {
			fleet: racks(),
			queue: queue(job("j").gang(3, 8).topology(gangway.LevelNVLink, true)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonNeverFits,
				"3 × 8 GPUs: needs 24 GPUs in one nvlink domain; the largest in the fleet has 16")},
		},
		"preferred: larger than any domain spreads": {
			fleet: racks(),
			queue: queue(job("j").gang(3, 8).topology(gangway.LevelNVLink, false)),
			wantPlaced: []gangway.Assignment{placed("j",
				on(0, "a2", seq(0, 8)...), on(1, "b1", seq(0, 8)...), on(2, "b2", seq(0, 8)...))},
		},
	})
}

func TestTopologyNode(t *testing.T) {
	runPlaceCases(t, map[string]placeCase{
		"required: both replicas on the node with room for both": {
			fleet: fleet(node("n1").gpus(8, "H100").used(0, 1, 2, 3), node("n2").gpus(8, "H100")),
			queue: queue(job("j").gang(2, 4).topology(gangway.LevelNode, true)),
			wantPlaced: []gangway.Assignment{placed("j",
				on(0, "n2", 0, 1, 2, 3), on(1, "n2", 4, 5, 6, 7))},
		},
		"without topology the replicas split": {
			fleet: fleet(node("n1").gpus(8, "H100").used(0, 1, 2, 3), node("n2").gpus(8, "H100")),
			queue: queue(job("j").gang(2, 4)),
			wantPlaced: []gangway.Assignment{placed("j",
				on(0, "n1", 4, 5, 6, 7), on(1, "n2", 0, 1, 2, 3))},
		},
		"required: split free capacity is fragmentation": {
			fleet: fleet(node("n1").gpus(8, "H100").used(0, 1, 2, 3), node("n2").gpus(8, "H100").used(0, 1, 2, 3)),
			queue: queue(job("j").gang(2, 4).topology(gangway.LevelNode, true)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonFragmented,
				"2 × 4 GPUs: 8 GPUs free, but no node domain has 8 free together")},
		},
		"required: more than a node has never fits": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")),
			queue: queue(job("j").gang(2, 8).topology(gangway.LevelNode, true)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonNeverFits,
				"2 × 8 GPUs: needs 16 GPUs in one node domain; the largest in the fleet has 8")},
		},
	})
}

func TestTopologyRackAndBlock(t *testing.T) {
	// Rack r1 has 20 free GPUs, r2 has 32; both are in block b1, and r3
	// (8 free) is alone in b2.
	fleetRB := func() *fleetBuilder {
		return fleet(
			node("n1").gpus(8, "H100").rack("r1").block("b1"),
			node("n2").gpus(8, "H100").rack("r1").block("b1"),
			node("n3").gpus(8, "H100").rack("r1").block("b1").used(0, 1, 2, 3),
			node("n4").gpus(8, "H100").rack("r2").block("b1"),
			node("n5").gpus(8, "H100").rack("r2").block("b1"),
			node("n6").gpus(8, "H100").rack("r2").block("b1"),
			node("n7").gpus(8, "H100").rack("r2").block("b1"),
			node("n8").gpus(8, "H100").rack("r3").block("b2"),
		)
	}
	all := func(gpus ...int) []int { return gpus }
	runPlaceCases(t, map[string]placeCase{
		"required: the rack that holds the gang": {
			fleet: fleetRB(),
			queue: queue(job("j").gang(4, 8).topology(gangway.LevelRack, true)),
			wantPlaced: []gangway.Assignment{placed("j",
				on(0, "n4", seq(0, 8)...), on(1, "n5", seq(0, 8)...), on(2, "n6", seq(0, 8)...), on(3, "n7", seq(0, 8)...))},
		},
		"required: the tightest rack that holds the gang": {
			fleet: fleetRB(),
			queue: queue(job("j").gang(2, 8).topology(gangway.LevelRack, true)),
			wantPlaced: []gangway.Assignment{placed("j",
				on(0, "n1", seq(0, 8)...), on(1, "n2", seq(0, 8)...))},
		},
		"preferred: spreads over racks when none holds it": {
			fleet: fleetRB(),
			queue: queue(job("j").gang(5, 8).topology(gangway.LevelRack, false)),
			wantPlaced: []gangway.Assignment{placed("j",
				on(0, "n1", seq(0, 8)...), on(1, "n2", seq(0, 8)...), on(2, "n4", seq(0, 8)...),
				on(3, "n5", seq(0, 8)...), on(4, "n6", seq(0, 8)...))},
		},
		"required: no rack holds it now": {
			fleet: fleetRB().with(running("r4").on("n4", 0)),
			queue: queue(job("j").gang(4, 8).topology(gangway.LevelRack, true)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonFragmented,
				"4 × 8 GPUs: 59 GPUs free, but no rack domain has 32 free together")},
		},
		"required: larger than any rack never fits": {
			fleet: fleetRB(),
			queue: queue(job("j").gang(5, 8).topology(gangway.LevelRack, true)),
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonNeverFits,
				"5 × 8 GPUs: needs 40 GPUs in one rack domain; the largest in the fleet has 32")},
		},
		"required: a block spans racks": {
			fleet: fleetRB(),
			queue: queue(job("j").gang(6, 8).topology(gangway.LevelBlock, true)),
			wantPlaced: []gangway.Assignment{placed("j",
				on(0, "n1", seq(0, 8)...), on(1, "n2", seq(0, 8)...), on(2, "n4", seq(0, 8)...),
				on(3, "n5", seq(0, 8)...), on(4, "n6", seq(0, 8)...), on(5, "n7", seq(0, 8)...))},
		},
		"required: a single replica stays in the smallest block": {
			fleet:      fleetRB(),
			queue:      queue(job("j").gang(1, 8).topology(gangway.LevelBlock, true)),
			wantPlaced: []gangway.Assignment{placed("j", on(0, "n8", all(0, 1, 2, 3, 4, 5, 6, 7)...))},
		},
	})
}
