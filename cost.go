package gangway

import (
	"fmt"
	"time"
)

// CostGroupBy is what a report's rows are: one per team, project or pool.
type CostGroupBy string

// The groupings a report supports.
const (
	CostByTeam    CostGroupBy = "team"
	CostByProject CostGroupBy = "project"
	CostByPool    CostGroupBy = "pool"
)

// ParseCostGroupBy checks a grouping name.
func ParseCostGroupBy(s string) (CostGroupBy, error) {
	switch g := CostGroupBy(s); g {
	case CostByTeam, CostByProject, CostByPool:
		return g, nil
	}
	return "", fmt.Errorf("want team, project or pool, got %q", s)
}

// CostSplit is one quantity by capacity type.
type CostSplit struct {
	OnPrem   float64 `json:"onPrem"`
	Spot     float64 `json:"spot"`
	OnDemand float64 `json:"onDemand"`
}

// CostRow is one group's usage in the window.
type CostRow struct {
	// Group is the team, project or pool ("" for segments without a
	// project).
	Group    string `json:"group"`
	Segments int    `json:"segments"`
	// InFlight is how many of the row's runs are still going: their
	// segments (counted in Segments, GPUHours and Dollars) end now, so
	// they show the cost so far.
	InFlight int       `json:"inFlight"`
	GPUHours CostSplit `json:"gpuHours"`
	Dollars  CostSplit `json:"dollars"`
	// TotalDollars is the sum of every segment's Dollars(), added in the
	// order the segments ran (not the sum of the three Dollars fields,
	// which may differ in the last bit).
	TotalDollars float64 `json:"totalDollars"`
	// SpotSavedDollars is what the group's spot GPU-hours would have cost
	// at on-demand prices minus what they cost; nil when the on-demand
	// price of a pool it used spot in is unknown. Zero without spot usage.
	SpotSavedDollars *float64 `json:"spotSavedDollars"`
}

// CostSummary is a cost report: one row per group, most expensive first, and the
// total over all of them.
type CostSummary struct {
	By    CostGroupBy `json:"by"`
	Since time.Time   `json:"since,omitzero"`
	Until time.Time   `json:"until,omitzero"`
	Rows  []CostRow   `json:"rows"`
	Total CostRow     `json:"total"`
}
