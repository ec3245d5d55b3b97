package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"go.temporal.io/api/serviceerror"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

func TestReach(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	tests := map[string]struct {
		err  error
		want string // "" for the error unchanged
	}{
		"temporal's client": {err: fmt.Errorf("describe job x: %w", serviceerror.NewUnavailable(
			`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:7233: connect: connection refused"`)),
			want: "temporal is unreachable: dial tcp 127.0.0.1:7233: connect: connection refused"},
		"redis's client":      {err: fmt.Errorf("nodes: %w", dial), want: "redis is unreachable: dial tcp: connect: connection refused"},
		"redis not answering": {err: fmt.Errorf("fleet nodes: %w", os.ErrDeadlineExceeded), want: "redis is unreachable: i/o timeout"},
		"another error":       {err: errors.New("bad input")},
		"job not found":       {err: ErrJobNotFound},
	}
	for name, tc := range tests {
		got := reach(tc.err)
		switch {
		case tc.want == "" && got != tc.err:
			t.Errorf("%s: reach = %v, want the error unchanged", name, got)
		case tc.want != "" && (!errors.Is(got, ErrUnavailable) || got.Error() != tc.want):
			t.Errorf("%s: reach = %q, want ErrUnavailable %q", name, got, tc.want)
		}
	}
	// Through the API: a 503 with the one line, which is ErrUnavailable.
	ae := AsAPIError(fmt.Errorf("logs: %w", dial))
	if ae.Status != 503 || ae.Code != CodeUnavailable || !errors.Is(ae, ErrUnavailable) || ae.Message != "redis is unreachable: dial tcp: connect: connection refused" {
		t.Errorf("AsAPIError = %+v", ae)
	}
}

// busyJobs is a Temporal that answers Describe for a running job and times
// out its status query: the workflow is not answering.
type busyJobs struct{ Jobs }

func (busyJobs) Describe(context.Context, gangway.JobID) (jobs.Description, error) {
	return jobs.Description{Running: true}, nil
}

func (busyJobs) Query(_ context.Context, id gangway.JobID) (workflows.Status, error) {
	return workflows.Status{}, fmt.Errorf("query job %s: %w", id, context.DeadlineExceeded)
}

// TestStatusOfAWorkflowThatDoesNotAnswer: a status query that times out
// after Temporal answered is the job's workflow not answering, said so,
// not "temporal is unreachable".
func TestStatusOfAWorkflowThatDoesNotAnswer(t *testing.T) {
	_, err := New(busyJobs{}, nil).Status(t.Context(), "train")
	want := "job train's workflow is unreachable: it did not answer its status query; either no gangway server is running its worker, or it is waiting for Redis or the ledger to answer"
	if !errors.Is(err, ErrUnavailable) || err.Error() != want {
		t.Errorf("Status = %v, want ErrUnavailable %q", err, want)
	}
}
