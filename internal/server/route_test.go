package server

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/dispatch"
)

type fakeQueues map[string]string

func (f fakeQueues) NodeTaskQueues(_ context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	for _, id := range ids {
		if q, ok := f[id]; ok {
			out[id] = q
		}
	}
	return out, nil
}

type signals struct {
	dispatch.Workflows
	got []gangway.Assignment
}

func (s *signals) SignalPlaced(_ context.Context, a gangway.Assignment) error {
	s.got = append(s.got, a)
	return nil
}

func TestRoutedFillsHostedMembers(t *testing.T) {
	tests := map[string]struct {
		members []gangway.Member
		want    []string // TaskQueue per member
	}{
		"own nodes keep their own queue": {
			members: []gangway.Member{{NodeID: "gpu-1"}, {Rank: 1, NodeID: "gpu-2"}},
			want:    []string{"", ""},
		},
		"hosted nodes get their host's queue": {
			members: []gangway.Member{{NodeID: "sim-1"}, {Rank: 1, NodeID: "gpu-1"}, {Rank: 2, NodeID: "sim-2"}},
			want:    []string{"host/h1", "", "host/h2"},
		},
		"a queue already set is kept": {
			members: []gangway.Member{{NodeID: "sim-1", TaskQueue: "host/old"}},
			want:    []string{"host/old"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &signals{}
			r := routed{Workflows: s, nodes: fakeQueues{"sim-1": "host/h1", "sim-2": "host/h2"}}
			a := gangway.Assignment{JobID: "j", Attempt: 1, Members: tc.members}
			before := cloneMembers(tc.members)
			if err := r.SignalPlaced(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range s.got[0].Members {
				got = append(got, m.TaskQueue)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("task queues (-want +got):\n%s", diff)
			}
			// The loop keeps the assignment it committed: routing works on a copy.
			if diff := cmp.Diff(before, tc.members); diff != "" {
				t.Errorf("caller's members changed (-before +after):\n%s", diff)
			}
		})
	}
}

func cloneMembers(ms []gangway.Member) []gangway.Member { return append([]gangway.Member(nil), ms...) }
