package capacity

import (
	"fmt"
	"testing"
)

// BenchmarkSnapshot reads the view of a large fleet with a long queue, as
// the dispatch loop does every cycle: nodes of 8 H100s, a quarter of them
// with one GPU allocated, and one-GPU jobs queued.
func BenchmarkSnapshot(b *testing.B) {
	for _, size := range []struct{ nodes, jobs int }{{1000, 1000}, {10000, 10000}} {
		b.Run(fmt.Sprintf("nodes=%d/jobs=%d", size.nodes, size.jobs), func(b *testing.B) {
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
