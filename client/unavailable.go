package client

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"go.temporal.io/api/serviceerror"
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
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
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
	msg := err.Error()
	if i := strings.LastIndex(msg, "dial tcp "); i >= 0 {
		return strings.TrimRight(msg[i:], `"\)`)
	}
	return msg
}
