package client

import (
	"errors"
	"fmt"

	"github.com/gangwayhq/gangway"
)

// More errors callers can check with errors.Is; the API client returns
// them for the API's refusals.
var (
	// ErrUnauthenticated: the API asked for credentials (HTTP 401): none
	// were sent, or the token is not valid.
	ErrUnauthenticated = errors.New("not authenticated")
	// ErrForbidden: the credentials are good but do not allow the call
	// (HTTP 403): another team's job, or an admin's call.
	ErrForbidden = errors.New("not allowed")
	// ErrInvalid: the request was refused as it stands (HTTP 400): a bad
	// spec or parameter, named in the message.
	ErrInvalid = errors.New("invalid request")
	// ErrNodeInUse: a node cannot be removed while its agent runs or a job
	// holds its GPUs (HTTP 409).
	ErrNodeInUse = errors.New("node in use")
)

// The codes of APIError, one per sentinel error.
const (
	CodeUnauthenticated = "unauthenticated"
	CodeForbidden       = "forbidden"
	CodeInvalid         = "invalid"
	CodeJobNotFound     = "job_not_found"
	CodeNotFound        = "not_found"
	CodeJobExists       = "job_exists"
	CodeJobEnded        = "job_ended"
	CodeNoView          = "no_view"
	CodeNodeInUse       = "node_in_use"
	// CodeUnavailable (unavailable.go) is a service that did not answer.
	CodeInternal = "internal"
)

// APIError is an error as the user API sends it: the HTTP status, a code
// naming its kind and a message for people. Its JSON is the body of every
// non-2xx response: {"error": MESSAGE, "code": CODE}.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"error"`
	// Problems are a refused job spec's, field by field.
	Problems []gangway.FieldError `json:"problems,omitempty"`
}

func (e *APIError) Error() string { return e.Message }

// Is matches the sentinel of the error's code: errors.Is(err,
// ErrForbidden) holds for a 403.
func (e *APIError) Is(target error) bool {
	switch e.Code {
	case CodeUnauthenticated:
		return target == ErrUnauthenticated
	case CodeForbidden:
		return target == ErrForbidden
	case CodeInvalid:
		return target == ErrInvalid || (target == gangway.ErrInvalidSpec && len(e.Problems) > 0)
	case CodeJobNotFound:
		return target == ErrJobNotFound
	case CodeJobExists:
		return target == ErrJobExists
	case CodeJobEnded:
		return target == ErrJobEnded
	case CodeNoView:
		return target == ErrNoView
	case CodeNodeInUse:
		return target == ErrNodeInUse
	case CodeUnavailable:
		return target == ErrUnavailable
	}
	return false
}

// Status codes of the API's errors, by code.
func statusOf(code string) int {
	switch code {
	case CodeUnauthenticated:
		return 401
	case CodeForbidden:
		return 403
	case CodeInvalid:
		return 400
	case CodeJobNotFound, CodeNotFound:
		return 404
	case CodeJobExists, CodeJobEnded, CodeNodeInUse:
		return 409
	case CodeNoView, CodeUnavailable:
		return 503
	}
	return 500
}

// AsAPIError turns err into the APIError the API sends for it: an
// APIError as it is; one of this package's sentinels (anywhere in the
// chain) as its code with err's message; a failure to reach Temporal or
// Redis as ErrUnavailable; anything else as an internal error.
func AsAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		if ae.Status == 0 {
			ae.Status = statusOf(ae.Code)
		}
		return ae
	}
	var se *gangway.SpecError
	if errors.As(err, &se) {
		return &APIError{Status: statusOf(CodeInvalid), Code: CodeInvalid, Message: err.Error(), Problems: se.Problems}
	}
	for _, s := range []struct {
		err  error
		code string
	}{{ErrJobNotFound, CodeJobNotFound}, {ErrJobExists, CodeJobExists}, {ErrJobEnded, CodeJobEnded},
		{ErrNoView, CodeNoView}, {ErrForbidden, CodeForbidden}, {ErrUnauthenticated, CodeUnauthenticated},
		{ErrInvalid, CodeInvalid}, {ErrUnavailable, CodeUnavailable}, {ErrNodeInUse, CodeNodeInUse}} {
		if errors.Is(err, s.err) {
			return &APIError{Status: statusOf(s.code), Code: s.code, Message: err.Error()}
		}
	}
	if u := reach(err); errors.Is(u, ErrUnavailable) {
		// A service the server could not reach: one line naming it.
		return &APIError{Status: statusOf(CodeUnavailable), Code: CodeUnavailable, Message: u.Error()}
	}
	return &APIError{Status: 500, Code: CodeInternal, Message: fmt.Sprintf("internal error: %v", err)}
}
