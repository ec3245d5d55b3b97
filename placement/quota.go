package placement

import "fmt"

// Quota is a team's nominal share of one GPU model, in GPUs, within a
// cohort whose members lend each other what they do not use.
type Quota struct {
	Team  string
	Model string // "" = any model
	// Nominal GPUs the team is guaranteed.
	Nominal int
	// BorrowingLimit caps how many GPUs beyond Nominal the team may borrow
	// from its cohort (nil: no cap).
	BorrowingLimit *int
	// LendingLimit caps how many of its unused GPUs the team lends to the
	// cohort (nil: all of them).
	LendingLimit *int
	Cohort       string
}

// quotaBook tracks GPU use per team and model against quotas. Teams
// without any quota are not limited.
type quotaBook struct {
	quotas map[string][]Quota  // by team
	used   map[[2]string]int64 // team, model → milli-GPU
}

func newQuotaBook(qs []Quota) *quotaBook {
	b := &quotaBook{quotas: map[string][]Quota{}, used: map[[2]string]int64{}}
	for _, q := range qs {
		b.quotas[q.Team] = append(b.quotas[q.Team], q)
	}
	return b
}

// find is the team's quota for model (a model-specific one first).
func (b *quotaBook) find(team, model string) (Quota, bool) {
	var anyModel *Quota
	for i, q := range b.quotas[team] {
		if q.Model == model {
			return q, true
		}
		if q.Model == "" {
			anyModel = &b.quotas[team][i]
		}
	}
	if anyModel != nil {
		return *anyModel, true
	}
	return Quota{}, false
}

func (b *quotaBook) key(q Quota, model string) [2]string {
	if q.Model == "" {
		return [2]string{q.Team, ""}
	}
	return [2]string{q.Team, model}
}

func (b *quotaBook) charge(team, model string, milli int64) {
	if q, ok := b.find(team, model); ok {
		b.used[b.key(q, model)] += milli
	}
}

// borrowing reports how many milli-GPU the team uses beyond nominal.
func (b *quotaBook) borrowing(q Quota, model string) int64 {
	return max(0, b.used[b.key(q, model)]-int64(q.Nominal)*Whole)
}

// cohortRoom is what the other members of team's cohort lend for model
// (unused nominal, capped by their lending limits) and how much of it other
// borrowers already use.
func (b *quotaBook) cohortRoom(cohort, model, team string) (lend, borrowedByOthers int64) {
	if cohort == "" {
		return 0, 0
	}
	for t, qs := range b.quotas {
		if t == team {
			continue
		}
		for _, q := range qs {
			if q.Cohort != cohort || (q.Model != "" && q.Model != model) {
				continue
			}
			used, nominal := b.used[b.key(q, model)], int64(q.Nominal)*Whole
			own := min(used, nominal)
			free := nominal - own
			if q.LendingLimit != nil {
				free = min(free, int64(*q.LendingLimit)*Whole)
			}
			lend += free
			borrowedByOthers += used - own
		}
	}
	return lend, borrowedByOthers
}

// admits checks that team may take milli more of model; the reason says
// why not, with numbers.
func (b *quotaBook) admits(team, model string, milli int64) (bool, string) {
	// Quotas are GPU quotas: a CPU-only task needs none, on any node.
	if milli <= 0 || len(b.quotas[team]) == 0 {
		return true, ""
	}
	q, ok := b.find(team, model)
	if !ok {
		return false, fmt.Sprintf("team %s has no quota for %s", team, model)
	}
	used := b.used[b.key(q, model)]
	after := used + milli
	nominal := int64(q.Nominal) * Whole
	if after <= nominal {
		return true, ""
	}
	borrow := after - nominal
	if q.BorrowingLimit != nil && borrow > int64(*q.BorrowingLimit)*Whole {
		return false, fmt.Sprintf("team %s uses %s/%d GPUs of %s quota; borrowing limit is %d",
			team, gpus(used), q.Nominal, modelName(q, model), *q.BorrowingLimit)
	}
	if q.Cohort == "" {
		return false, fmt.Sprintf("team %s uses %s/%d GPUs of %s quota; it is in no cohort to borrow from",
			team, gpus(used), q.Nominal, modelName(q, model))
	}
	lend, others := b.cohortRoom(q.Cohort, model, team)
	if avail := max(lend-others, 0); borrow > avail {
		return false, fmt.Sprintf("team %s uses %s/%d GPUs of %s quota; cohort %q has %s to lend",
			team, gpus(used), q.Nominal, modelName(q, model), q.Cohort, gpus(avail))
	}
	return true, ""
}

func modelName(q Quota, model string) string {
	if q.Model == "" {
		return "GPU"
	}
	return model
}

func gpus(milli int64) string {
	if milli%Whole == 0 {
		return fmt.Sprint(milli / Whole)
	}
	return fmt.Sprintf("%.1f", float64(milli)/Whole)
}

// cohortOf is the team's cohort for model ("" if none).
func (b *quotaBook) cohortOf(team, model string) string {
	q, _ := b.find(team, model)
	return q.Cohort
}

// isBorrowing reports whether team currently uses more of model than its
// nominal quota.
func (b *quotaBook) isBorrowing(team, model string) bool {
	q, ok := b.find(team, model)
	return ok && b.borrowing(q, model) > 0
}

// withinNominal reports whether team would stay within its nominal quota
// taking milli more of model.
func (b *quotaBook) withinNominal(team, model string, milli int64) bool {
	q, ok := b.find(team, model)
	return ok && b.used[b.key(q, model)]+milli <= int64(q.Nominal)*Whole
}

func (b *quotaBook) hasQuotas() bool { return len(b.quotas) > 0 }
