package accounting

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

type segs []gangway.UsageSegment

func (s segs) Segments(context.Context, time.Time, time.Time) ([]gangway.UsageSegment, error) {
	return s, nil
}

func TestBudgets(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	month := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	seg := func(team string, ct gangway.CapacityType, start time.Time, hours, price float64) gangway.UsageSegment {
		return gangway.UsageSegment{JobID: "j", Team: team, Pool: "p", CapacityType: ct, GPUs: 1,
			Start: start, End: start.Add(time.Duration(hours * float64(time.Hour))), PricePerGPUHour: price}
	}
	b := Budgets{
		Ledger: segs{
			seg("nlp", gangway.CapacitySpot, month.Add(time.Hour), 10, 2),              // $20
			seg("nlp", gangway.CapacityOnPrem, month.Add(time.Hour), 100, 1),           // on-prem: not cloud spend
			seg("nlp", gangway.CapacityOnDemand, month.Add(-5*time.Hour), 10, 3),       // half in last month: $15
			seg("vision", gangway.CapacityOnDemand, month.Add(24*time.Hour), 1000, 10), // way over
		},
		Teams: map[string]TeamLimit{"nlp": {MonthlyBudget: 100, MaxPricePerGPUHour: 4}, "vision": {MonthlyBudget: 50}, "speech": {}},
	}
	got, err := b.TeamPolicies(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]placement.TeamPolicy{
		"nlp":    {MaxPricePerGPUHour: 4, BudgetLeft: 65, Since: month},
		"vision": {BudgetLeft: 0, Since: month},
		"speech": {BudgetLeft: placement.NoBudget},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("policies (-want +got):\n%s", d)
	}
}
