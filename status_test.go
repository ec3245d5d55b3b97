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
