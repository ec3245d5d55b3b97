package capacity

import (
	"fmt"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
)

// BenchmarkSnapshot reads the view of a large fleet with a long queue, as
// the dispatch loop does every cycle: nodes of 8 H100s, every one
// heartbeating, one-GPU jobs queued; busy, every node runs an 8-GPU job.
func BenchmarkSnapshot(b *testing.B) {
	for _, size := range []struct {
		nodes, jobs int
		busy        bool
	}{{1000, 1000, false}, {10000, 10000, false}, {10000, 10000, true}} {
		b.Run(fmt.Sprintf("nodes=%d/jobs=%d/busy=%t", size.nodes, size.jobs, size.busy), func(b *testing.B) {
			ctx := b.Context()
			v := newView(startRedis(b), Options{})
			// Every node registered and heartbeating, as a server's
			// agents keep them.
			beats := make([]NodeBeat, size.nodes)
			for i := range size.nodes {
				must(b, v.RegisterNode(ctx, node(fmt.Sprintf("n%05d", i), 8)))
				beats[i] = NodeBeat{ID: fmt.Sprintf("n%05d", i)}
			}
			if _, err := v.HeartbeatNodes(ctx, beats); err != nil {
				b.Fatal(err)
			}
			if size.busy {
				ok, err := v.AcquireLease(ctx, leader, time.Hour)
				if err != nil || !ok {
					b.Fatalf("lease: %v %v", ok, err)
				}
				var plan []gangway.Assignment
				for i := range size.nodes {
					id := fmt.Sprintf("run-%05d", i)
					if _, err := v.Enqueue(ctx, entry(id, 1, 1, 8)); err != nil {
						b.Fatal(err)
					}
					plan = append(plan, assign(id, 1, member(0, fmt.Sprintf("n%05d", i), 0, 1, 2, 3, 4, 5, 6, 7)))
					if len(plan) == 500 || i == size.nodes-1 {
						must(b, v.Commit(ctx, leader, plan))
						plan = nil
					}
				}
			}
			for i := range size.jobs {
				if _, err := v.Enqueue(ctx, entry(fmt.Sprintf("j%05d", i), 1, 1, 1)); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				s, err := v.Snapshot(ctx)
				if err != nil || len(s.Nodes) != size.nodes || len(s.Queue) != size.jobs {
					b.Fatalf("snapshot: %d nodes, %d queued, %v", len(s.Nodes), len(s.Queue), err)
				}
			}
		})
	}
}
