package placement_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// flaky sets the flakiness of GPU g of node i in s.
func flaky(s placement.Snapshot, i, g int, score float64) placement.Snapshot {
	s.Nodes[i].GPUs[g].Flakiness = score
	return s
}

func TestFlakyGPUs(t *testing.T) {
	// Two nodes whose GPU 0 faulted twice this week; GPU 1 is steady.
	twoFlaky := func() placement.Snapshot {
		s := fleet(node("n1").gpus(2, "H100").domain("n1/nvswitch"), node("n2").gpus(2, "H100").domain("n2/nvswitch")).build()
		return flaky(flaky(s, 0, 0, 1.9), 1, 0, 1.9)
	}
	tests := map[string]struct {
		snap placement.Snapshot
		job  *jobBuilder
		want []gangway.Member // nil: not placed
	}{
		"a short single replica may use a flaky GPU": {
			snap: twoFlaky(), job: job("short").runtime(time.Hour),
			want: []gangway.Member{on(0, "n1", 0)},
		},
		"a long single replica stays off it": {
			snap: twoFlaky(), job: job("long").runtime(8 * time.Hour),
			want: []gangway.Member{on(0, "n1", 1)},
		},
		"a job that does not say how long it runs counts as long": {
			snap: twoFlaky(), job: job("unknown"),
			want: []gangway.Member{on(0, "n1", 1)},
		},
		"a short gang stays off it": {
			snap: twoFlaky(), job: job("gang").gang(2, 1).runtime(time.Hour),
			want: []gangway.Member{on(0, "n1", 1), on(1, "n2", 1)},
		},
		"a gang that needs the flaky GPU waits": {
			snap: twoFlaky(), job: job("gang2").gang(2, 2).runtime(time.Hour),
		},
		"a GPU at the threshold is not flaky": {
			snap: flaky(fleet(node("n1").gpus(1, "H100")).build(), 0, 0, placement.FlakyThreshold),
			job:  job("at").runtime(8 * time.Hour),
			want: []gangway.Member{on(0, "n1", 0)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			plan := placement.Place(tc.snap, queue(tc.job), placement.Options{})
			var got []gangway.Member
			for _, a := range plan.Assignments {
				got = append(got, a.Members...)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("members (-want +got):\n%s\nunplaced: %+v", diff, plan.Unplaced)
			}
		})
	}
}
