package capacity

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gangwayhq/gangway"
)

// Enqueue adds the entry to the queue, or overwrites the job's entry.
// Activities run at least once, so it is idempotent and ordered by attempt:
// it returns false and changes nothing when the job already holds an
// allocation for the same or a later attempt (a retried enqueue arriving
// after the commit), or when the queued entry has a later attempt.
//
// A job may be queued for attempt N+1 while it still holds the GPUs of an
// older attempt; Commit refuses to place it until Release frees them.
func (v *View) Enqueue(ctx context.Context, e gangway.QueueEntry) (bool, error) {
	if e.JobID == "" {
		return false, errors.New("enqueue: empty job id")
	}
	b, err := json.Marshal(e)
	if err != nil {
		return false, fmt.Errorf("enqueue %s: %w", e.JobID, err)
	}
	pinned := "0"
	if len(e.Nodes) > 0 {
		pinned = "1"
	}
	keys := []string{v.k.queue, v.k.allocs, v.k.bursting, v.k.queueChanges, v.k.rev}
	n, err := enqueueScript.Run(ctx, v.rdb, keys, e.JobID, e.Attempt, b, pinned).Int()
	if err != nil {
		return false, fmt.Errorf("enqueue %s: %w", e.JobID, err)
	}
	if n == 1 {
		v.announce(ctx, EventEnqueued)
	}
	return n == 1, nil
}

// Dequeue removes the job from the queue and forgets a burst sent to it (a
// cancelled job). It is a no-op if the job is neither.
func (v *View) Dequeue(ctx context.Context, jobID gangway.JobID) error {
	keys := []string{v.k.queue, v.k.bursting, v.k.queueChanges, v.k.rev}
	if err := dequeueScript.Run(ctx, v.rdb, keys, jobID).Err(); err != nil {
		return fmt.Errorf("dequeue %s: %w", jobID, err)
	}
	return nil
}

// Queue returns the pending jobs in queue order: Priority descending, then
// SubmittedAt ascending, then JobID.
func (v *View) Queue(ctx context.Context) ([]gangway.QueueEntry, error) {
	raw, err := v.rdb.HGetAll(ctx, v.k.queue).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	q, err := decodeQueue(raw)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	return q, nil
}

// decodeQueue decodes P:queue fields and sorts them in queue order.
func decodeQueue(raw map[string]string) ([]gangway.QueueEntry, error) {
	q := make([]gangway.QueueEntry, 0, len(raw))
	for id, s := range raw {
		var e gangway.QueueEntry
		if err := json.Unmarshal([]byte(s), &e); err != nil {
			return nil, fmt.Errorf("decode queue entry %s: %w", id, err)
		}
		q = append(q, e)
	}
	SortQueue(q)
	return q, nil
}

// SortQueue sorts entries in queue order: Priority descending, then
// SubmittedAt ascending (a requeued job keeps its place), then JobID.
func SortQueue(q []gangway.QueueEntry) {
	slices.SortFunc(q, func(a, b gangway.QueueEntry) int { return compareQueue(&a, &b) })
}

// compareQueue orders two entries as SortQueue does.
func compareQueue(a, b *gangway.QueueEntry) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
		return c
	}
	return strings.Compare(a.JobID, b.JobID)
}
