package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	tclient "go.temporal.io/sdk/client"
)

// Check is one thing a ready process needs. Probe returns nil when it holds.
type Check struct {
	Name  string
	Probe func(ctx context.Context) error
}

// Temporal checks that the Temporal frontend answers.
func Temporal(c tclient.Client) Check {
	return Check{Name: "temporal", Probe: func(ctx context.Context) error {
		_, err := c.CheckHealth(ctx, &tclient.CheckHealthRequest{})
		return err
	}}
}

// Redis checks that Redis answers.
func Redis(r redis.UniversalClient) Check {
	return Check{Name: "redis", Probe: func(ctx context.Context) error { return r.Ping(ctx).Err() }}
}

// Rebuilder says whether the Redis view is rebuilt for its current
// generation (capacity.View.Rebuilt).
type Rebuilder interface {
	Rebuilt(ctx context.Context) (bool, error)
}

// View checks that the Redis view's generation is current: it was not
// lost, or it has been rebuilt since (until then nothing is placed).
func View(v Rebuilder) Check {
	return Check{Name: "view", Probe: func(ctx context.Context) error {
		ok, err := v.Rebuilt(ctx)
		if err == nil && !ok {
			err = errors.New("the view is new or was lost, and is not rebuilt yet")
		}
		return err
	}}
}

// Result is how one check went.
type Result struct {
	Name string
	Err  error
}

// probeTimeout bounds each check of a readiness probe.
const probeTimeout = 2 * time.Second

// Run runs every check at once, each for at most two seconds, and returns
// their results in order.
func Run(ctx context.Context, checks []Check) []Result {
	out := make([]Result, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			out[i] = Result{Name: c.Name, Err: c.Probe(cctx)}
		})
	}
	wg.Wait()
	return out
}

// Handlers returns /healthz, which answers 200 while the process serves,
// and /readyz, which runs the checks and answers 200 when all hold and 503
// otherwise, one line per check ("redis: ok", "temporal: <why not>").
func Handlers(checks []Check) (healthz, readyz http.Handler) {
	healthz = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	readyz = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		results := Run(r.Context(), checks)
		var b strings.Builder
		code := http.StatusOK
		for _, res := range results {
			if res.Err != nil {
				code = http.StatusServiceUnavailable
				fmt.Fprintf(&b, "%s: %s\n", res.Name, Reason(res.Err))
			} else {
				fmt.Fprintf(&b, "%s: ok\n", res.Name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		fmt.Fprint(w, b.String())
	})
	return healthz, readyz
}

// Reason shortens a connection error to what a person acts on: the network
// error at its root ("dial tcp 127.0.0.1:6379: connect: connection
// refused") rather than every layer's wrapping of it.
func Reason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error()
	}
	msg := err.Error()
	// gRPC reports the dial failure inside its own text.
	if i := strings.LastIndex(msg, "dial tcp "); i >= 0 {
		return strings.TrimRight(msg[i:], `"\)`)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time"
	}
	const maxLen = 200
	if len(msg) > maxLen {
		msg = msg[:maxLen] + "…"
	}
	return msg
}
