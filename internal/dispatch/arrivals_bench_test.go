package dispatch

import (
	"fmt"
	"testing"

	"github.com/gangwayhq/gangway"
)

// BenchmarkNoteArrivals is one cycle's arrivals bookkeeping with 10,000
// jobs waiting and one new: what the loop adds to every cycle.
func BenchmarkNoteArrivals(b *testing.B) {
	queue := make([]gangway.QueueEntry, 10000)
	for i := range queue {
		queue[i] = gangway.QueueEntry{JobID: gangway.JobID(fmt.Sprintf("job-%05d", i)), Attempt: 1, Replicas: 1, GPUsPerReplica: 1}
	}
	l := &Loop{}
	l.noteArrivals(queue)
	b.ReportAllocs()
	for b.Loop() {
		l.noteArrivals(queue)
	}
}
