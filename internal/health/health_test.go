package health

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	tclient "go.temporal.io/sdk/client"

	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
)

func get(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestReadyOnRealServers: /readyz answers 200 with one "ok" line per check
// while a real Temporal dev server and redis-server answer, and 503 naming
// Redis, with the root cause, once redis-server is killed; /healthz answers
// 200 throughout.
func TestReadyOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a Temporal dev server")
	}
	ts := devstacktest.Temporal(t)
	r := devstacktest.Redis(t)
	tc, err := tclient.Dial(tclient.Options{HostPort: ts.Addr, Namespace: ts.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer rdb.Close()
	healthz, readyz := Handlers([]Check{Temporal(tc), Redis(rdb)})

	if code, body := get(t, readyz); code != http.StatusOK || body != "temporal: ok\nredis: ok\n" {
		t.Errorf("readyz with both up: %d %q", code, body)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, readyz)
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "temporal: ok\nredis: dial tcp ") ||
		!strings.Contains(body, "connection refused") {
		t.Errorf("readyz with redis down: %d %q", code, body)
	}
	if code, body := get(t, healthz); code != http.StatusOK || body != "ok\n" {
		t.Errorf("healthz: %d %q", code, body)
	}
}

func TestReason(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, dialErr := net.Dial("tcp", addr)
	want := "dial tcp " + addr + ": connect: connection refused"
	if got := Reason(errors.Join(errors.New("ping"), dialErr)); got != want {
		t.Errorf("Reason(a wrapped dial error) = %q, want %q", got, want)
	}
	grpc := errors.New(`failed reaching server: last connection error: connection error: desc = "transport: Error while dialing: dial tcp ` + addr + `: connect: connection refused"`)
	if got := Reason(grpc); got != "dial tcp "+addr+": connect: connection refused" {
		t.Errorf("Reason(gRPC's dial error) = %q", got)
	}
	if got := Reason(context.DeadlineExceeded); got != "no answer in time" {
		t.Errorf("Reason(deadline) = %q", got)
	}
	if got := Reason(errors.New(strings.Repeat("x", 300))); len(got) > 210 {
		t.Errorf("Reason of a long error is %d bytes", len(got))
	}
}
