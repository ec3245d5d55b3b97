package gangway

import (
	"testing"
	"time"

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

func TestETAString(t *testing.T) {
	now := time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		eta  ETA
		want string
	}{
		"soon":    {ETA{P50: now.Add(42 * time.Minute), P90: now.Add(70 * time.Minute), At: now}, "in 42m (P90 in 1h10m)"},
		"started": {ETA{P50: now.Add(-time.Second), P90: now.Add(-time.Second), At: now.Add(-time.Minute)}, "now"},
		"cloud":   {ETA{P50: now.Add(5 * time.Minute), P90: now.Add(5 * time.Minute), At: now, Cloud: true}, "in 5m on cloud capacity"},
		"beyond the horizon": {ETA{P50: now.Add(3 * time.Hour), P90: now.Add(3 * time.Hour), At: now, Beyond: true},
			"not in 3h or sooner (beyond what the estimate looks ahead)"},
		"nothing frees it": {ETA{P50: now.Add(-time.Minute), P90: now, At: now.Add(-time.Minute), Beyond: true},
			"none in sight: nothing running or queued is expected to free what it needs"},
	} {
		if got := tc.eta.String(now); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}
