package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/activity"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// TestNodesShowsLostAfterTTL: `gangway nodes` through the user API over a
// real Redis shows a node whose agent stopped heartbeating as lost once it
// has been silent longer than the node TTL (server.nodeTTL, 1 s here),
// judged on the Redis server's clock; a node that keeps heartbeating stays
// ready.
func TestNodesShowsLostAfterTTL(t *testing.T) {
	r := devstacktest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	view := capacity.New(rdb, capacity.Options{NodeTTL: time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, n := range agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 2, GPUs: 1, Model: "H100"}}) {
		if err := view.RegisterNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	// node-0's agent keeps heartbeating; node-1's has stopped.
	go func() {
		for ctx.Err() == nil {
			_ = view.Heartbeat(ctx, "node-0", nil)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	url, token := startAPI(t, nil, view, nil)
	state := func(out, node string) string {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 6 && f[0] == node {
				return f[6]
			}
		}
		return ""
	}
	for {
		out, err := runGangway(t, "nodes", "--api", url, "--token", token)
		if err != nil {
			t.Fatalf("gangway nodes: %v\n%s", err, out)
		}
		if s := state(out, "node-0"); s != "ready" {
			t.Fatalf("the heartbeating node is %q, want ready:\n%s", s, out)
		}
		if s := state(out, "node-1"); s == "lost" {
			t.Logf("gangway nodes:\n%s", out)
			return
		} else if s != "ready" {
			t.Fatalf("the silent node is %q, want ready until its TTL, then lost:\n%s", s, out)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the silent node never showed lost:\n%s", out)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestCommandsWithAServiceDown: through the user API, with Redis
// unreachable the commands whose data is in Temporal (list, status, why,
// cancel, submit) still work — status and why saying in one line that Redis is
// unreachable and what that hides — and the ones that need Redis (nodes,
// cordon) fail with that one line; with Temporal unreachable, nodes works
// and status and logs (whose owner Temporal knows) fail with one line
// naming Temporal.
func TestCommandsWithAServiceDown(t *testing.T) {
	ts := devstacktest.Temporal(t)
	r := devstacktest.Redis(t)
	tc, err := tclient.Dial(tclient.Options{HostPort: ts.Addr, Namespace: ts.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	// A worker runs the job's workflow with a queue that takes it: it
	// stays Queued and answers queries.
	w := worker.New(tc, workflows.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(workflows.JobWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowName})
	w.RegisterActivityWithOptions(func(context.Context, workflows.EnqueueInput) error { return nil },
		activity.RegisterOptions{Name: workflows.ActivityEnqueue})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	spec := gangway.JobSpec{Name: "train", Team: "ml", Command: []string{"true"}, Gang: gangway.Gang{Replicas: 1, GPUsPerReplica: 1}}
	spec.Default()
	j := jobs.New(tc)
	if err := j.Start(t.Context(), spec, jobs.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	// Visibility is eventually consistent, and the job must be queued.
	for {
		list, lerr := j.List(t.Context())
		st, qerr := j.Query(t.Context(), "train")
		if lerr == nil && qerr == nil && len(list) == 1 && st.Phase == gangway.PhaseQueued {
			break
		}
		select {
		case <-t.Context().Done():
			t.Fatal("the job was never listed and queued")
		case <-time.After(100 * time.Millisecond):
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	view := capacity.New(rdb, capacity.Options{})
	if err := view.RegisterNode(t.Context(), agent.FakeNode("node-0", "onprem", "127.0.0.1", 1, "H100")); err != nil {
		t.Fatal(err)
	}
	closed, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	down := fmt.Sprintf("127.0.0.1:%d", closed)
	deadRedis := redis.NewClient(&redis.Options{Addr: down, MaxRetries: -1})
	defer deadRedis.Close()
	deadTemporal, err := tclient.NewLazyClient(tclient.Options{HostPort: down, Namespace: ts.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer deadTemporal.Close()
	urlNoRedis, token := startAPI(t, tc, capacity.New(deadRedis, capacity.Options{}), nil)
	urlNoTemporal, token2 := startAPI(t, deadTemporal, view, nil)
	redisDown := []string{"--api", urlNoRedis, "--token", token}
	temporalDown := []string{"--api", urlNoTemporal, "--token", token2}
	redisLine := "redis is unreachable: dial tcp " + down + ": connect: connection refused"
	temporalLine := "temporal is unreachable: dial tcp " + down + ": connect: connection refused"
	specFile := filepath.Join(t.TempDir(), "late.yaml")
	if err := os.WriteFile(specFile, []byte("name: late\nteam: ml\ncommand: [\"true\"]\ngang: {replicas: 1, gpusPerReplica: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name     string
		args     []string
		wantOut  string // in the output
		wantLine string // said once: as a warning, or as the error
		wantErr  bool
	}{
		{name: "list without redis", args: append([]string{"list"}, redisDown...), wantOut: "train"},
		{name: "status without redis", args: append([]string{"status", "train"}, redisDown...), wantOut: "Phase:     Queued",
			wantLine: "warning: " + redisLine + "; why the job waits is not shown"},
		{name: "why without redis", args: append([]string{"why", "train"}, redisDown...), wantOut: "Why: not known now",
			wantLine: "warning: " + redisLine},
		{name: "nodes without redis", args: append([]string{"nodes"}, redisDown...), wantLine: redisLine, wantErr: true},
		{name: "cordon without redis", args: append([]string{"cordon", "node-0"}, redisDown...), wantLine: redisLine, wantErr: true},
		{name: "nodes without temporal", args: append([]string{"nodes"}, temporalDown...), wantOut: "node-0"},
		// The API asks Temporal whose job it is before it shows its logs.
		{name: "logs without temporal", args: append([]string{"logs", "train"}, temporalDown...), wantLine: temporalLine, wantErr: true},
		{name: "status without temporal", args: append([]string{"status", "train"}, temporalDown...), wantLine: temporalLine, wantErr: true},
		// Accepting a job is starting its workflow; the fleet check is
		// skipped, and said so.
		{name: "submit without redis", args: append([]string{"submit", specFile}, redisDown...), wantOut: "job late submitted",
			wantLine: "warning: job late is not checked against the fleet (read fleet: " + redisLine + "); it is submitted and waits until the view is back"},
		{name: "status of the job submitted without redis", args: append([]string{"status", "late"}, redisDown...), wantOut: "Job:       late (team ml)",
			wantLine: "warning: " + redisLine + "; why the job waits is not shown"},
		{name: "cancel without redis", args: append([]string{"cancel", "train"}, redisDown...), wantOut: "cancel"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runGangway(t, tt.args...)
			if (err != nil) != tt.wantErr {
				t.Fatalf("gangway %s: error %v, want error %t\n%s", strings.Join(tt.args, " "), err, tt.wantErr, out)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("output lacks %q:\n%s", tt.wantOut, out)
			}
			said := out
			if err != nil {
				said += "gangway: " + err.Error() + "\n"
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("the error is more than one line: %q", err)
				}
			}
			if tt.wantLine != "" && strings.Count(said, tt.wantLine) != 1 {
				t.Errorf("want %q said once; got:\n%s", tt.wantLine, said)
			}
			if tt.wantLine == "" && strings.Contains(said, "unreachable") {
				t.Errorf("a command that does not use the service down mentions it:\n%s", said)
			}
		})
	}
}
