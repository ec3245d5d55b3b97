package placement_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway/placement"
)

// TestMayStartIsNecessary: when MayStart says no job could start, Place
// starts none and preempts nobody — on idle and on busy fleets, with and
// without preemption and quotas. (About a third of the generated cases
// are ones where it says so.)
func TestMayStartIsNecessary(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		snap := genSnapshot(t, 0, 20)
		q := genQueue(t, snap)
		opts := genOptions(t)
		opts.MaxAssignments = 0
		may := placement.NewSession(snap, opts).MayStart(q)
		plan := placement.NewSession(snap, opts).Place(q)
		if !may && (len(plan.Assignments) > 0 || len(plan.Preemptions) > 0) {
			t.Fatalf("MayStart = false, but the plan starts %d and preempts for %d\nsnapshot: %s\nqueue: %s\nplan: %s",
				len(plan.Assignments), len(plan.Preemptions), dump(snap), dump(q), dump(plan))
		}
	})
}
