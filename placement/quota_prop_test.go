package placement_test

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// TestQuotaMilliNeverOverAdmits: over cycles of placements and departures,
// on fleets of whole GPUs and MIG devices, with queues of whole-GPU gangs,
// GPU shares and MIG jobs, no team ever holds more milli-GPU than its
// quota allows: its nominal quota without a cohort, nominal plus its
// borrowing limit, and never more than nominal plus what the rest of its
// cohort is guaranteed. Use is counted here from the running allocations,
// each GPU at its share (a MIG device at its compute slices out of seven),
// not read from the engine's books.
func TestQuotaMilliNeverOverAdmits(t *testing.T) {
	placedShares, placedMIG := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		var f fleetBuilder
		f.now = t0
		for i := range rapid.IntRange(1, 4).Draw(t, "nodes") {
			id := fmt.Sprintf("n%d", i+1)
			gpus := rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, id+".gpus")
			b := node(id).gpus(gpus, "H100")
			for g := range gpus {
				if p := rapid.SampledFrom([]string{"", "", "1g.10gb", "3g.40gb"}).Draw(t, fmt.Sprintf("%s.gpu%d", id, g)); p != "" {
					b.mig(p, g)
				}
			}
			f.nodes = append(f.nodes, b)
		}
		snap := f.build()
		var quotas []placement.Quota
		for _, team := range genTeams {
			q := placement.Quota{Team: team, Model: "H100", Nominal: rapid.IntRange(0, 4).Draw(t, team+".nominal"),
				Cohort: rapid.SampledFrom([]string{"", "", "research"}).Draw(t, team+".cohort")}
			if rapid.Bool().Draw(t, team+".limit") {
				q.BorrowingLimit = intp(rapid.IntRange(0, 2).Draw(t, team+".borrowingLimit"))
			}
			quotas = append(quotas, q)
		}
		opts := placement.Options{Quotas: quotas, Preempt: rapid.Bool().Draw(t, "preempt"), Reservations: rapid.IntRange(0, 1).Draw(t, "reservations")}
		var q []gangway.QueueEntry
		for cycle := range rapid.IntRange(1, 5).Draw(t, "cycles") {
			for k := range rapid.IntRange(0, 6).Draw(t, fmt.Sprintf("c%d.arrivals", cycle)) {
				id := fmt.Sprintf("c%dj%d", cycle, k)
				b := job(id).team(rapid.SampledFrom(genTeams).Draw(t, id+".team")).preemptible().
					prio(rapid.SampledFrom([]int{50, 100, 200}).Draw(t, id+".prio")).
					runtime(time.Duration(rapid.IntRange(1, 4).Draw(t, id+".hours")) * time.Hour)
				switch rapid.IntRange(0, 2).Draw(t, id+".shape") {
				case 0:
					b.share(rapid.SampledFrom([]int{100, 250, 500, 700}).Draw(t, id+".milli")).replicas(rapid.IntRange(1, 3).Draw(t, id+".replicas"))
				case 1:
					b.mig(rapid.SampledFrom([]string{"1g.10gb", "3g.40gb"}).Draw(t, id+".profile")).replicas(rapid.IntRange(1, 3).Draw(t, id+".replicas"))
				default:
					b.gang(rapid.IntRange(1, 2).Draw(t, id+".replicas"), rapid.SampledFrom([]int{1, 2}).Draw(t, id+".gpusPer"))
				}
				q = append(q, b.j)
			}
			plan := placement.Place(snap, q, opts)
			snap = applyPlan(snap, plan.Assignments)
			started := map[string]bool{}
			for _, a := range plan.Assignments {
				started[a.JobID] = true
				switch {
				case a.Members[0].MIG != "":
					placedMIG++
				case a.Members[0].Milli > 0:
					placedShares++
				}
			}
			var waiting []gangway.QueueEntry
			for _, j := range q {
				if !started[j.JobID] {
					waiting = append(waiting, j)
				}
			}
			q = waiting
			checkQuotaUse(t, snap, quotas, fmt.Sprintf("after cycle %d", cycle))
			// Some running jobs end, and time moves on.
			var ended []string
			for _, r := range snap.Running {
				if rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("c%d.%s.ends", cycle, r.JobID)) == 0 {
					ended = append(ended, r.JobID)
				}
			}
			snap = withoutRunning(snap, ended)
			snap.Now = snap.Now.Add(10 * time.Minute)
		}
	})
	t.Logf("placed %d share jobs and %d MIG jobs under quotas", placedShares, placedMIG)
	if placedShares == 0 || placedMIG == 0 {
		t.Errorf("placed %d share jobs and %d MIG jobs: the test does not exercise both", placedShares, placedMIG)
	}
}

// checkQuotaUse fails if a team holds more than its quota can allow.
func checkQuotaUse(t *rapid.T, snap placement.Snapshot, quotas []placement.Quota, when string) {
	model := map[string]string{}
	for _, n := range snap.Nodes {
		model[n.ID] = n.Model
	}
	use := map[string]int64{}
	for _, r := range snap.Running {
		for _, m := range r.Members {
			use[r.Team] += int64(len(m.GPUs)) * int64(meteredMilli(model[m.NodeID], m))
		}
	}
	for _, q := range quotas {
		most := int64(q.Nominal) * placement.Whole
		if q.Cohort != "" {
			for _, o := range quotas {
				if o.Team != q.Team && o.Cohort == q.Cohort {
					most += int64(o.Nominal) * placement.Whole
				}
			}
		}
		if q.BorrowingLimit != nil {
			most = min(most, int64(q.Nominal+*q.BorrowingLimit)*placement.Whole)
		}
		if use[q.Team] > most {
			limit := "none"
			if q.BorrowingLimit != nil {
				limit = fmt.Sprint(*q.BorrowingLimit)
			}
			t.Fatalf("%s: team %s holds %dm of H100, its quota allows at most %dm (nominal %d, cohort %q, borrowing limit %s)",
				when, q.Team, use[q.Team], most, q.Nominal, q.Cohort, limit)
		}
	}
}
