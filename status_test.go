package gangway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNodeStatusJobs(t *testing.T) {
	s := NodeStatus{Allocated: map[int]JobID{0: "b", 1: "a", 2: "b", 5: "c"}}
	if diff := cmp.Diff([]JobID{"a", "b", "c"}, s.Jobs()); diff != "" {
		t.Errorf("Jobs (-want +got):\n%s", diff)
	}
	if got := (NodeStatus{}).Jobs(); len(got) != 0 {
		t.Errorf("Jobs of an idle node = %v, want none", got)
	}
}

// TestFormatDollars: cents, or four decimals under a cent, so that a job of a
// few GPU-seconds does not read as free.
func TestFormatDollars(t *testing.T) {
	for v, want := range map[float64]string{
		0:       "$0.00",
		0.0036:  "$0.0036",
		-0.0036: "$-0.0036",
		0.01:    "$0.01",
		0.456:   "$0.46",
		12.5:    "$12.50",
	} {
		if got := FormatDollars(v); got != want {
			t.Errorf("FormatDollars(%v) = %q, want %q", v, got, want)
		}
	}
}
