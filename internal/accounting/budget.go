package accounting

import (
	"context"
	"fmt"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// TeamLimit is a team's cloud policy from config.
type TeamLimit struct {
	// MonthlyBudget is the most the team may spend on cloud capacity in a
	// calendar month (UTC), in dollars; 0 means no budget.
	MonthlyBudget float64
	// MaxPricePerGPUHour caps the price of any burst; 0 means no cap.
	MaxPricePerGPUHour float64
}

// SegmentSource is the part of the ledger budgets read.
type SegmentSource interface {
	Segments(ctx context.Context, since, until time.Time) ([]gangway.UsageSegment, error)
}

// Budgets turns team limits and the ledger's month-to-date cloud spend into
// the placement engine's team policies. Spend counts recorded segments,
// i.e. finished attempts; what is committed beyond them is charged before
// each burst decision: runs on cloud nodes at their expected length and
// the cycle's other bursts by the engine, bursts still launching by the
// dispatch loop.
type Budgets struct {
	Ledger SegmentSource
	Teams  map[string]TeamLimit
}

// TeamPolicies implements the dispatch loop's Budgets.
func (b Budgets) TeamPolicies(ctx context.Context, now time.Time) (map[string]placement.TeamPolicy, error) {
	if len(b.Teams) == 0 {
		return nil, nil
	}
	now = now.UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	segs, err := b.Ledger.Segments(ctx, month, now)
	if err != nil {
		return nil, fmt.Errorf("team budgets: %w", err)
	}
	spent := map[string]float64{}
	for _, s := range segs {
		if s.CapacityType == gangway.CapacityOnPrem {
			continue
		}
		if c, ok := clip(s, month, now); ok {
			spent[s.Team] += c.Dollars()
		}
	}
	out := make(map[string]placement.TeamPolicy, len(b.Teams))
	for team, l := range b.Teams {
		p := placement.TeamPolicy{MaxPricePerGPUHour: l.MaxPricePerGPUHour, BudgetLeft: placement.NoBudget}
		if l.MonthlyBudget > 0 {
			p.BudgetLeft, p.Since = max(l.MonthlyBudget-spent[team], 0), month
		}
		out[team] = p
	}
	return out, nil
}
