package client

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"go.temporal.io/api/serviceerror"
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
		"redis's client": {err: fmt.Errorf("nodes: %w", dial), want: "redis is unreachable: dial tcp: connect: connection refused"},
		"another error":  {err: errors.New("bad input")},
		"job not found":  {err: ErrJobNotFound},
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
