package placement_test

import (
	"testing"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

func TestQuotas(t *testing.T) {
	// 32 H100 and 8 A100, plenty for every case: only quotas get in the way.
	big := func(rs ...*runBuilder) *fleetBuilder {
		return fleet(
			node("h1").gpus(8, "H100"), node("h2").gpus(8, "H100"), node("h3").gpus(8, "H100"), node("h4").gpus(8, "H100"),
			node("a1").gpus(8, "A100"),
		).with(rs...)
	}
	research := func(nlp, vision placement.Quota) []placement.Quota {
		nlp.Team, vision.Team = "nlp", "vision"
		nlp.Model, vision.Model = "H100", "H100"
		nlp.Cohort, vision.Cohort = "research", "research"
		return []placement.Quota{nlp, vision}
	}
	runPlaceCases(t, map[string]placeCase{
		"within nominal": {
			fleet:      big(running("r").team("nlp").on("h1", 0, 1, 2, 3)),
			queue:      queue(job("j").team("nlp").gang(1, 4)),
			opts:       placement.Options{Quotas: []placement.Quota{{Team: "nlp", Model: "H100", Nominal: 8}}},
			wantPlaced: []gangway.Assignment{placed("j", on(0, "h1", 4, 5, 6, 7))},
		},
		"over nominal without a cohort": {
			fleet: big(running("r").team("nlp").on("h1", 0, 1, 2, 3)),
			queue: queue(job("j").team("nlp").gang(1, 8)),
			opts:  placement.Options{Quotas: []placement.Quota{{Team: "nlp", Model: "H100", Nominal: 8}}},
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonQuota,
				"1 × 8 GPUs: team nlp uses 4/8 GPUs of H100 quota; it is in no cohort to borrow from")},
		},
		"quota is charged job by job within a plan": {
			fleet:      big(),
			queue:      queue(job("j1").team("nlp").gang(1, 8), job("j2").team("nlp")),
			opts:       placement.Options{Quotas: []placement.Quota{{Team: "nlp", Model: "H100", Nominal: 8}}},
			wantPlaced: []gangway.Assignment{placed("j1", on(0, "h1", seq(0, 8)...))},
			wantUnplaced: []placement.Unplaced{waiting("j2", placement.ReasonQuota,
				"1 × 1 GPU: team nlp uses 8/8 GPUs of H100 quota; it is in no cohort to borrow from")},
		},
		"borrowing from the cohort": {
			fleet:      big(running("r").team("nlp").on("h1", seq(0, 8)...)),
			queue:      queue(job("j").team("nlp").gang(1, 8)),
			opts:       placement.Options{Quotas: research(placement.Quota{Nominal: 8}, placement.Quota{Nominal: 16})},
			wantPlaced: []gangway.Assignment{placed("j", on(0, "h2", seq(0, 8)...))},
		},
		"borrowing up to the borrowing limit": {
			fleet: big(running("r").team("nlp").on("h1", 0, 1, 2, 3)),
			queue: queue(job("j").team("nlp").gang(1, 8)),
			opts: placement.Options{Quotas: research(
				placement.Quota{Nominal: 8, BorrowingLimit: intp(4)}, placement.Quota{Nominal: 16})},
			wantPlaced: []gangway.Assignment{placed("j", on(0, "h2", seq(0, 8)...))},
		},
		"borrowing past the borrowing limit": {
			fleet: big(running("r").team("nlp").on("h1", 0, 1, 2, 3, 4)),
			queue: queue(job("j").team("nlp").gang(1, 8)),
			opts: placement.Options{Quotas: research(
				placement.Quota{Nominal: 8, BorrowingLimit: intp(4)}, placement.Quota{Nominal: 16})},
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonQuota,
				"1 × 8 GPUs: team nlp uses 5/8 GPUs of H100 quota; borrowing limit is 4")},
		},
		"the lender's lending limit": {
			fleet: big(running("r").team("nlp").on("h1", seq(0, 8)...)),
			queue: queue(job("j").team("nlp").gang(1, 4)),
			opts: placement.Options{Quotas: research(
				placement.Quota{Nominal: 8}, placement.Quota{Nominal: 16, LendingLimit: intp(2)})},
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonQuota,
				`1 × 4 GPUs: team nlp uses 8/8 GPUs of H100 quota; cohort "research" has 2 to lend`)},
		},
		"within the lending limit": {
			fleet: big(running("r").team("nlp").on("h1", seq(0, 8)...)),
			queue: queue(job("j").team("nlp").gang(1, 2)),
			opts: placement.Options{Quotas: research(
				placement.Quota{Nominal: 8}, placement.Quota{Nominal: 16, LendingLimit: intp(2)})},
			wantPlaced: []gangway.Assignment{placed("j", on(0, "h2", 0, 1))},
		},
		"what the lender uses itself is not lent": {
			fleet: big(
				running("r").team("nlp").on("h1", seq(0, 8)...),
				running("v").team("vision").on("h2", seq(0, 8)...).on("h3", seq(0, 6)...)),
			queue: queue(job("j").team("nlp").gang(1, 4)),
			opts:  placement.Options{Quotas: research(placement.Quota{Nominal: 8}, placement.Quota{Nominal: 16})},
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonQuota,
				`1 × 4 GPUs: team nlp uses 8/8 GPUs of H100 quota; cohort "research" has 2 to lend`)},
		},
		"what another borrower took is not lent again": {
			fleet: big(
				running("r").team("nlp").on("h1", seq(0, 8)...),
				running("i").team("infra").on("h2", 0, 1, 2)),
			queue: queue(job("j").team("nlp").gang(1, 2)),
			opts: placement.Options{Quotas: append(research(placement.Quota{Nominal: 8}, placement.Quota{Nominal: 4}),
				placement.Quota{Team: "infra", Model: "H100", Cohort: "research"})},
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonQuota,
				`1 × 2 GPUs: team nlp uses 8/8 GPUs of H100 quota; cohort "research" has 1 to lend`)},
		},
		"no quota for the model": {
			fleet: big(),
			queue: queue(job("j").team("nlp").models("A100")),
			opts:  placement.Options{Quotas: []placement.Quota{{Team: "nlp", Model: "H100", Nominal: 8}}},
			wantUnplaced: []placement.Unplaced{waiting("j", placement.ReasonQuota,
				"1 × 1 GPU (A100): team nlp has no quota for A100")},
		},
		"a job open to any model goes where its team has quota": {
			fleet:      fleet(node("a1").gpus(8, "A100"), node("h1").gpus(8, "H100")),
			queue:      queue(job("j").team("nlp")),
			opts:       placement.Options{Quotas: []placement.Quota{{Team: "nlp", Model: "H100", Nominal: 8}}},
			wantPlaced: []gangway.Assignment{placed("j", on(0, "h1", 0))},
		},
		"an any-model quota counts every model": {
			fleet:      big(running("r").team("nlp").on("a1", 0, 1, 2, 3, 4, 5)),
			queue:      queue(job("j1").team("nlp").gang(1, 2).models("H100"), job("j2").team("nlp").models("H100")),
			opts:       placement.Options{Quotas: []placement.Quota{{Team: "nlp", Nominal: 8}}},
			wantPlaced: []gangway.Assignment{placed("j1", on(0, "h1", 0, 1))},
			wantUnplaced: []placement.Unplaced{waiting("j2", placement.ReasonQuota,
				"1 × 1 GPU (H100): team nlp uses 8/8 GPUs of GPU quota; it is in no cohort to borrow from")},
		},
		"teams without quotas are not limited": {
			fleet:      big(),
			queue:      queue(job("j").team("infra").gang(1, 8)),
			opts:       placement.Options{Quotas: []placement.Quota{{Team: "nlp", Model: "H100", Nominal: 0}}},
			wantPlaced: []gangway.Assignment{placed("j", on(0, "h1", seq(0, 8)...))},
		},
		"shares count in milli-GPU": {
			fleet:      big(running("r").team("nlp").share(500).on("h1", 0)),
			queue:      queue(job("s1").team("nlp").share(500), job("s2").team("nlp").share(100)),
			opts:       placement.Options{Quotas: []placement.Quota{{Team: "nlp", Model: "H100", Nominal: 1}}},
			wantPlaced: []gangway.Assignment{placed("s1", shareOn(0, "h1", 500, 0))},
			wantUnplaced: []placement.Unplaced{waiting("s2", placement.ReasonQuota,
				"1 × 100m GPU share: team nlp uses 1/1 GPUs of H100 quota; it is in no cohort to borrow from")},
		},
		"GPU quotas do not hold back CPU-only tasks": {
			fleet:      fleet(node("c1"), node("h1").gpus(8, "H100")),
			queue:      queue(job("c").team("nlp").cpuOnly()),
			opts:       placement.Options{Quotas: []placement.Quota{{Team: "nlp", Model: "H100", Nominal: 0}}},
			wantPlaced: []gangway.Assignment{placed("c", cpuOn(0, "c1"))},
		},
	})
}
