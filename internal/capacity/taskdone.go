package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

// taskDoneTTL is how long a task's exit record is kept: far longer than
// any wait for a lost node's task to be given up on.
const taskDoneTTL = 24 * time.Hour

func (v *View) taskDoneKey(jobID gangway.JobID, attempt, rank int) string {
	return v.k.taskDone + string(jobID) + "/" + strconv.Itoa(attempt) + "/" + strconv.Itoa(rank)
}

// RecordTaskDone records that a task's process exited 0, for a day.
func (v *View) RecordTaskDone(ctx context.Context, d workflows.TaskDone) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("record task done: %w", err)
	}
	if err := v.rdb.Set(ctx, v.taskDoneKey(d.JobID, d.Attempt, d.Rank), b, taskDoneTTL).Err(); err != nil {
		return fmt.Errorf("record %s attempt %d rank %d done: %w", d.JobID, d.Attempt, d.Rank, err)
	}
	return nil
}

// TaskDone returns the record of a task that exited 0; false when there is
// none (it did not, or the view lost it).
func (v *View) TaskDone(ctx context.Context, jobID gangway.JobID, attempt, rank int) (workflows.TaskDone, bool, error) {
	b, err := v.rdb.Get(ctx, v.taskDoneKey(jobID, attempt, rank)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return workflows.TaskDone{}, false, nil
	case err != nil:
		return workflows.TaskDone{}, false, fmt.Errorf("read %s attempt %d rank %d done: %w", jobID, attempt, rank, err)
	}
	var d workflows.TaskDone
	if err := json.Unmarshal(b, &d); err != nil {
		return workflows.TaskDone{}, false, fmt.Errorf("read %s attempt %d rank %d done: %w", jobID, attempt, rank, err)
	}
	return d, true, nil
}
