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
	"github.com/gangwayhq/gangway/placement/forecast"
)

// Learned is what the dispatch leader has learned from what it saw, as it
// stores it in the view: a new leader goes on from it instead of from
// nothing, and readers outside the loop (the web view's fragmentation
// chart) measure against its typical workload, as the loop does. Like
// the rest of the view it can be lost; a leader then learns afresh.
type Learned struct {
	// Workload is the typical workload of the jobs that have arrived
	// (placement.WorkloadHistory.Classes, weights summing to 1), Arrivals
	// how many arrivals it stands for (WorkloadHistory.Weight).
	Workload []placement.WorkloadClass `json:"workload,omitempty"`
	Arrivals float64                   `json:"arrivals,omitempty"`
	// ETA is the start-time estimator's runtimes and calibration
	// (forecast.Estimator.State); nil with estimates off.
	ETA *forecast.State `json:"eta,omitempty"`
	// At is when the leader stored it, on its clock.
	At time.Time `json:"at"`
}

var (
	//go:embed scripts/learned_save.lua
	learnedSaveLua    string
	learnedSaveScript = redis.NewScript(learnedSaveLua)
)

// SaveLearned stores l if holder holds the dispatch lease; ErrNotLeader
// (nothing stored) if it does not.
func (v *View) SaveLearned(ctx context.Context, holder string, l Learned) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("save learned: %w", err)
	}
	n, err := learnedSaveScript.Run(ctx, v.rdb, []string{v.k.lease, v.k.learned}, holder, b).Int()
	if err != nil {
		return fmt.Errorf("save learned: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("save learned: %w", ErrNotLeader)
	}
	return nil
}

// Learned returns what the dispatch leader stored last; the zero Learned
// when nothing is, as in a new or flushed view.
func (v *View) Learned(ctx context.Context) (Learned, error) {
	raw, err := v.rdb.Get(ctx, v.k.learned).Bytes()
	if errors.Is(err, redis.Nil) {
		return Learned{}, nil
	}
	if err != nil {
		return Learned{}, fmt.Errorf("learned: %w", err)
	}
	var l Learned
	if err := json.Unmarshal(raw, &l); err != nil {
		return Learned{}, fmt.Errorf("learned: decode %s: %w", v.k.learned, err)
	}
	return l, nil
}
