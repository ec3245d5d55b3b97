package capacity

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway/placement"
)

// Workload is the typical workload the dispatch leader has learned from
// the jobs it saw arrive (placement.WorkloadHistory), as it stores it: a
// new leader goes on from it, and readers outside the loop (the web
// view's fragmentation chart) measure against it, as the loop does.
type Workload struct {
	// Classes are the history's (WorkloadHistory.Classes), weights
	// summing to 1; Arrivals how many arrivals they stand for
	// (WorkloadHistory.Weight).
	Classes  []placement.WorkloadClass `json:"classes"`
	Arrivals float64                   `json:"arrivals"`
	// At is when the leader stored it, on its clock.
	At time.Time `json:"at"`
}

var (
	//go:embed scripts/workload_save.lua
	workloadSaveLua    string
	workloadSaveScript = redis.NewScript(workloadSaveLua)
)

// SaveWorkload stores w as the fleet's typical workload if holder holds
// the dispatch lease; ErrNotLeader (nothing stored) if it does not.
func (v *View) SaveWorkload(ctx context.Context, holder string, w Workload) error {
	b, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("save workload: %w", err)
	}
	n, err := workloadSaveScript.Run(ctx, v.rdb, []string{v.k.lease, v.k.workload}, holder, b).Int()
	if err != nil {
		return fmt.Errorf("save workload: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("save workload: %w", ErrNotLeader)
	}
	return nil
}

// Workload returns the stored typical workload; the zero Workload (no
// classes) when none is, as in a new or flushed view.
func (v *View) Workload(ctx context.Context) (Workload, error) {
	raw, err := v.rdb.Get(ctx, v.k.workload).Bytes()
	if errors.Is(err, redis.Nil) {
		return Workload{}, nil
	}
	if err != nil {
		return Workload{}, fmt.Errorf("workload: %w", err)
	}
	var w Workload
	if err := json.Unmarshal(raw, &w); err != nil {
		return Workload{}, fmt.Errorf("workload: decode %s: %w", v.k.workload, err)
	}
	return w, nil
}
