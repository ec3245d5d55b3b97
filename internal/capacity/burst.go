package capacity

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
)

var (
	//go:embed scripts/burst.lua
	burstLua    string
	burstScript = redis.NewScript(burstLua)
)

// StartBurst takes a queued job out of the queue to run on instances rented
// for it and records request (a JSON object with an "attempt" field) so a
// new leader can deliver it again. It is fenced by the lease: ErrNotLeader
// if holder does not hold it, ErrStale if the job is no longer queued at
// that attempt. The record goes when the job is queued pinned to its
// instances, queued for a later attempt, or dequeued.
func (v *View) StartBurst(ctx context.Context, holder string, jobID gangway.JobID, attempt int, request []byte) error {
	keys := []string{v.k.lease, v.k.queue, v.k.bursting, v.k.queueChanges, v.k.rev}
	n, err := burstScript.Run(ctx, v.rdb, keys, holder, jobID, attempt, request).Int()
	switch {
	case err != nil:
		return fmt.Errorf("burst %s: %w", jobID, err)
	case n < 0:
		return fmt.Errorf("burst %s: %w", jobID, ErrNotLeader)
	case n == 0:
		return fmt.Errorf("burst %s attempt %d: %w", jobID, attempt, ErrStale)
	}
	return nil
}

// Bursts returns the burst requests not yet replaced by a pinned enqueue,
// by job.
func (v *View) Bursts(ctx context.Context) (map[gangway.JobID][]byte, error) {
	raw, err := v.rdb.HGetAll(ctx, v.k.bursting).Result()
	if err != nil {
		return nil, fmt.Errorf("bursts: %w", err)
	}
	out := make(map[gangway.JobID][]byte, len(raw))
	for id, s := range raw {
		out[id] = []byte(s)
	}
	return out, nil
}

// ForgetBurst drops a job's burst record (its workflow is gone).
func (v *View) ForgetBurst(ctx context.Context, jobID gangway.JobID) error {
	if err := v.rdb.HDel(ctx, v.k.bursting, jobID).Err(); err != nil {
		return fmt.Errorf("forget burst %s: %w", jobID, err)
	}
	return nil
}
