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

// SaveLearned stores l if holder holds the dispatch lease; ErrNotLeader
// (nothing stored) if it does not. The estimator's state, which grows
// with the groups it learned and the queue, goes under a key of its own,
// so that the typical workload is read without it (TypicalWorkload).
func (v *View) SaveLearned(ctx context.Context, holder string, l Learned) error {
	eta := l.ETA
	l.ETA = nil
	return v.leaderSet(ctx, "save learned", holder, []string{v.k.learned, v.k.learnedETA}, l, eta)
}

// Learned returns what the dispatch leader stored last; the zero Learned
// when nothing is, as in a new or flushed view.
func (v *View) Learned(ctx context.Context) (Learned, error) {
	var l Learned
	if err := v.leaderGet(ctx, "learned", v.k.learned, &l); err != nil {
		return l, err
	}
	err := v.leaderGet(ctx, "learned", v.k.learnedETA, &l.ETA)
	return l, err
}

// TypicalWorkload is the typical workload the dispatch leader stored last
// (Learned.Workload, without the estimator's state); nil when none is.
func (v *View) TypicalWorkload(ctx context.Context) ([]placement.WorkloadClass, error) {
	var l Learned
	err := v.leaderGet(ctx, "typical workload", v.k.learned, &l)
	return l.Workload, err
}

// Defrags is the dispatch leader's record of defragmentation
// (internal/dispatch's defrag.go), as it stores it each time it changes:
// a new leader keeps the reservations of those under way and counts the
// hour's moves against the budget instead of spending it again.
type Defrags struct {
	// InFlight are the defragmentations under way: their moved jobs are
	// stopping, the job they make room for waits.
	InFlight []placement.DefragPlan `json:"inFlight,omitempty"`
	// Spent is what those planned in the last hour cost, oldest first.
	Spent []DefragSpend `json:"spent,omitempty"`
}

// DefragSpend is what one planned defragmentation cost, when.
type DefragSpend struct {
	At             time.Time `json:"at"`
	Moves          int       `json:"moves"`
	LostGPUSeconds float64   `json:"lostGPUSeconds"`
}

// SaveDefrags stores d if holder holds the dispatch lease; ErrNotLeader
// (nothing stored) if it does not.
func (v *View) SaveDefrags(ctx context.Context, holder string, d Defrags) error {
	return v.leaderSet(ctx, "save defragmentations", holder, []string{v.k.defrags}, d)
}

// Defrags returns the record the dispatch leader stored last; the zero
// Defrags when none is.
func (v *View) Defrags(ctx context.Context) (Defrags, error) {
	var d Defrags
	err := v.leaderGet(ctx, "defragmentations", v.k.defrags, &d)
	return d, err
}

var (
	//go:embed scripts/leader_set.lua
	leaderSetLua    string
	leaderSetScript = redis.NewScript(leaderSetLua)
)

// leaderSet stores the JSON of each of xs under the key of the same
// index, all at once, if holder holds the dispatch lease; ErrNotLeader
// (nothing stored) if it does not. what names the operation in errors.
func (v *View) leaderSet(ctx context.Context, what, holder string, keys []string, xs ...any) error {
	args := []any{holder}
	for _, x := range xs {
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		args = append(args, b)
	}
	n, err := leaderSetScript.Run(ctx, v.rdb, append([]string{v.k.lease}, keys...), args...).Int()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotLeader)
	}
	return nil
}

// leaderGet decodes key's JSON into x, leaving x as it is when the key
// does not exist.
func (v *View) leaderGet(ctx context.Context, what, key string, x any) error {
	raw, err := v.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := json.Unmarshal(raw, x); err != nil {
		return fmt.Errorf("%s: decode %s: %w", what, key, err)
	}
	return nil
}
