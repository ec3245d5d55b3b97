package fullstack

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/fake"
)

// TestStartAndClose brings up the whole stack — servers, in-process
// server, two simulated nodes, a fake cloud — checks each piece answers,
// and that Close leaves no child process behind.
func TestStartAndClose(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st, err := Start(ctx, Options{
		Dir: t.TempDir(), Headless: true,
		Nodes: agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 2, GPUs: 8, Model: "H100"}}),
		Agent: agent.Config{HeartbeatInterval: 200 * time.Millisecond},
		Cloud: func(ctx context.Context, hooks FakeHooks) (*Cloud, error) {
			f, err := fake.New(fake.Options{Pools: []fake.Pool{{Name: "a100-spot", Zone: "z", InstanceType: "a100x8",
				GPUModel: "A100", GPUs: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 12}},
				OnRunning: hooks.OnRunning, OnNotice: hooks.OnNotice, OnTerminated: hooks.OnTerminated})
			if err != nil {
				return nil, err
			}
			reg, err := cloud.NewRegistry([]providers.Provider{f}, cloud.RegistryOptions{})
			if err != nil {
				return nil, err
			}
			return &Cloud{Registry: reg, Fakes: []*fake.Provider{f}}, nil
		},
		Server: &ServerOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	nodes, err := st.View.FleetNodes(ctx)
	if err != nil || len(nodes) != 2 {
		t.Errorf("fleet nodes = %d (%v), want 2", len(nodes), err)
	}
	resp, err := http.Get("http://" + st.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("metrics: %s", resp.Status)
	}
	if got := st.Cloud.Describe(ctx); len(got) != 1 || !strings.Contains(got[0], "a100-spot") {
		t.Errorf("Describe = %q, want the a100-spot pool", got)
	}
	if left := st.Cloud.Leftovers(ctx); len(left) != 0 {
		t.Errorf("Leftovers = %q, want none", left)
	}
	select {
	case <-st.Done():
		t.Fatalf("server stopped early: %v", st.Err())
	default:
	}

	// An agent started later registers too, and stops on Stop.
	a := st.StartAgent(agent.Config{Node: agent.FakeNode("late", "onprem", "127.0.0.1", 4, "L4"),
		HeartbeatInterval: 200 * time.Millisecond})
	if err := st.WaitForNodes(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(); err != nil {
		t.Errorf("agent stop: %v", err)
	}

	pids := []int{st.Redis.Pid(), st.Temporal.Pid()}
	st.Close()
	select {
	case <-st.Done():
	default:
		t.Error("Done not closed after Close")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still running after Close", pid)
		}
	}
}

// TestSupervise: a stack that supervises its servers starts redis-server
// and the Temporal dev server again after each is killed, at the same
// address, and says so; Close still leaves no process behind.
func TestSupervise(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	events := make(chan string, 16)
	st, err := Start(ctx, Options{Dir: t.TempDir(), Headless: true, Supervise: func(e string) { events <- e }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	expect := func(want string) {
		t.Helper()
		select {
		case e := <-events:
			if !strings.Contains(e, want) {
				t.Fatalf("event %q, want one with %q", e, want)
			}
		case <-ctx.Done():
			t.Fatalf("no event with %q", want)
		}
	}
	for _, tc := range []struct {
		name string
		kill func() error
		pid  func() int
		ping func() error
	}{
		{"redis-server", st.Redis.Kill, st.Redis.Pid, func() error { return st.RedisClient.Ping(ctx).Err() }},
		{"the Temporal dev server", st.Temporal.Kill, st.Temporal.Pid, func() error {
			_, err := st.TemporalClient.CheckHealth(ctx, &tclient.CheckHealthRequest{})
			return err
		}},
	} {
		old := tc.pid()
		if err := tc.kill(); err != nil {
			t.Fatal(err)
		}
		expect(tc.name + " exited")
		expect(tc.name + " is back")
		if tc.pid() == old {
			t.Errorf("%s: same pid %d after the restart", tc.name, old)
		}
		// A client's first call after the restart may still go out on the
		// old server's connection; it reconnects on the next.
		err := tc.ping()
		for deadline := time.Now().Add(10 * time.Second); err != nil && time.Now().Before(deadline); err = tc.ping() {
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("%s does not answer after the restart: %v", tc.name, err)
		}
	}
	pids := []int{st.Redis.Pid(), st.Temporal.Pid()}
	st.Close()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still running after Close", pid)
		}
	}
	select {
	case e := <-events:
		t.Errorf("an event after Close: %q", e)
	default:
	}
}
