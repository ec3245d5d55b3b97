package client

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"go.temporal.io/api/serviceerror"

	"github.com/gangwayhq/gangway"
)

// ErrUnavailable: a service the call needs did not answer — Temporal,
// which holds the jobs, or Redis, which holds the fleet, the queue and task
// output (HTTP 503 from the user API). The error that wraps it is one line
// naming the service and why: "redis is unreachable: dial tcp
// 10.0.0.5:6379: connect: connection refused". Calls that need only the
// other service go on working.
var ErrUnavailable = errors.New("service unavailable")

// CodeUnavailable is APIError's code for ErrUnavailable.
const CodeUnavailable = "unavailable"

// unavailableError is a service that did not answer.
type unavailableError struct{ service, reason string }

func (e *unavailableError) Error() string        { return e.service + " is unreachable: " + e.reason }
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// unanswered is a running job's workflow that did not answer its status
// query in time although Temporal answered: no worker runs it, or it is
// waiting (without limit, by design) on Redis or the ledger.
func unanswered(id gangway.JobID) error {
	return &unavailableError{service: "job " + string(id) + "'s workflow",
		reason: "it did not answer its status query; either no gangway server is running its worker, or it is waiting for Redis or the ledger to answer"}
}

// timedOut reports a call that ran out of time rather than being refused.
func timedOut(err error) bool {
	var deadline *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline)
}

// reach turns a failure to reach Temporal or Redis into ErrUnavailable,
// naming the service by the error's kind: Temporal's client reports
// gRPC statuses, Redis's the network's errors. Other errors pass as they
// are.
func reach(err error) error {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	var op *net.OpError
	switch {
	case err == nil || errors.Is(err, ErrUnavailable):
		return err
	case errors.As(err, &unavailable) || errors.As(err, &deadline):
		return &unavailableError{service: "temporal", reason: rootCause(err)}
	case errors.As(err, &op), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		// A Redis that accepts connections but does not answer (stopped,
		// overloaded, a network partition): go-redis returns the socket's
		// deadline error as it is.
		errors.Is(err, os.ErrDeadlineExceeded):
		return &unavailableError{service: "redis", reason: rootCause(err)}
	}
	return err
}

// rootCause is the network error at the root of err ("dial tcp
// 127.0.0.1:6379: connect: connection refused") rather than every layer's
// wrapping of it.
func rootCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return os.ErrDeadlineExceeded.Error()
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, "dial tcp "); i >= 0 {
		return strings.TrimRight(msg[i:], `"\)`)
	}
	return msg
}
