package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

// Wait follows the job until it ends and returns its final status. It
// reads the status every interval and calls change (if not nil) with it
// whenever the phase, the attempt or the waiting reason changes — what
// `gangway submit --wait` prints as progress. A status read that fails
// while the job exists is retried at the next interval.
func (c *Client) Wait(ctx context.Context, id gangway.JobID, every time.Duration, change func(JobStatus)) (workflows.Status, error) {
	var last JobStatus
	first := true
	for {
		st, err := c.Status(ctx, id)
		switch {
		case errors.Is(err, ErrJobNotFound) || ctx.Err() != nil:
			return workflows.Status{}, err
		case err != nil:
			// A query needs a worker to answer it, and Temporal under load
			// drops some: progress waits for the next read, and the end
			// is read from the workflow's result, which does not.
			select {
			case <-ctx.Done():
				return workflows.Status{}, fmt.Errorf("wait for job %s: %w", id, ctx.Err())
			case <-time.After(every):
			}
			continue
		}
		if change != nil && (first || st.Phase != last.Phase || st.Attempt != last.Attempt || waitingText(st) != waitingText(last)) {
			change(st)
		}
		first, last = false, st
		if st.Phase.Terminal() {
			return st.Status, nil
		}
		select {
		case <-ctx.Done():
			return workflows.Status{}, fmt.Errorf("wait for job %s: %w", id, ctx.Err())
		case <-time.After(every):
		}
	}
}

func waitingText(st JobStatus) string {
	if st.Waiting == nil {
		return ""
	}
	return st.Waiting.String()
}

// WaitDrained waits until none of jobs holds GPUs on the node any more
// (each stopped, released and requeued), reading the nodes every interval
// and calling left (if not nil) with the jobs still there whenever that
// list changes — what `gangway drain` prints as progress.
func (c *Client) WaitDrained(ctx context.Context, nodeID string, jobs []gangway.JobID, every time.Duration, left func([]gangway.JobID)) error {
	var last []gangway.JobID
	first := true
	for {
		nodes, err := c.Nodes(ctx)
		if err != nil {
			return fmt.Errorf("drain %s: %w", nodeID, err)
		}
		var still []gangway.JobID
		for _, n := range nodes {
			if n.Node.ID != nodeID {
				continue
			}
			for _, j := range n.Jobs() {
				if slices.Contains(jobs, j) {
					still = append(still, j)
				}
			}
		}
		if left != nil && (first || !slices.Equal(still, last)) {
			left(still)
		}
		first, last = false, still
		if len(still) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drain %s: jobs still on it: %s: %w", nodeID, strings.Join(still, ", "), ctx.Err())
		case <-time.After(every):
		}
	}
}
