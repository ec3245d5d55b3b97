package e2e

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/fake"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// TestWhyOnRealServers: three jobs wait, each for a different reason — its
// team's quota, fragmentation, a reservation of its own — and `gangway
// why` says so for each, with a start-time estimate, the jobs whose end
// frees what it needs (only those), and the cloud alternative, priced.
// Real Temporal and redis-server, the real dispatch loop and agents
// running real processes; the output is logged so it can be pasted.
//
// Four nodes of 8 H100: vision-train (team vision, at its 8-GPU quota) and
// research-run fill two of them; nlp-a and nlp-b take 6 GPUs of each of
// the others. Then three jobs wait:
//   - big-gang, 2 × 8 GPUs of high priority, needs two whole nodes and
//     holds the reservation (on the nodes whose jobs' max runtimes end
//     first); the estimate has it start on two of the first three nodes
//     to empty (nlp-a's, vision-train's, research-run's);
//   - nlp-one, one replica of 4 GPUs, sees 4 GPUs free, 2 on each nlp
//     node — fragmented — and starts on the third;
//   - vision-eval has GPUs free for it but not quota, and starts when
//     vision-train's end frees it.
func TestWhyOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	sc, err := baselines.ScorerByName("gangway")
	if err != nil {
		t.Fatal(err)
	}
	opts := placement.Options{Scorer: sc, Reservations: 1, Quotas: []placement.Quota{{Team: "vision", Model: "H100", Nominal: 8}}}
	st, err := fullstack.Start(ctx, fullstack.Options{
		Dir: t.TempDir(), Headless: true,
		Log:   slog.New(slog.DiscardHandler),
		Nodes: agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 4, GPUs: 8, Model: "H100"}}),
		Agent: agent.Config{HeartbeatInterval: 500 * time.Millisecond},
		Cloud: func(ctx context.Context, hooks fullstack.FakeHooks) (*fullstack.Cloud, error) {
			f, err := fake.New(fake.Options{Pools: []fake.Pool{{Name: "fake-h100-spot", Zone: "fake-1a", InstanceType: "h100x8",
				GPUModel: "H100", GPUs: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 24, MaxInstances: 4}},
				OnRunning: hooks.OnRunning, OnNotice: hooks.OnNotice, OnTerminated: hooks.OnTerminated})
			if err != nil {
				return nil, err
			}
			reg, err := cloud.NewRegistry([]providers.Provider{f}, cloud.RegistryOptions{})
			if err != nil {
				return nil, err
			}
			return &fullstack.Cloud{Registry: reg, Fakes: []*fake.Provider{f}}, nil
		},
		Server: &fullstack.ServerOptions{Dispatch: dispatch.Config{Placement: opts}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := client.New(jobs.New(st.TemporalClient), st.View)

	job := func(name, team string, replicas, gpus int, priority string, run, maxRuntime time.Duration) gangway.JobSpec {
		return gangway.JobSpec{Name: name, Team: team, PriorityClass: priority,
			Command:          []string{"sleep", strconv.Itoa(int(run.Seconds()))},
			Gang:             gangway.Gang{Replicas: replicas, GPUsPerReplica: gpus},
			EstimatedRuntime: gangway.Duration{Duration: run}, MaxRuntime: gangway.Duration{Duration: maxRuntime}}
	}
	submit := func(specs ...gangway.JobSpec) {
		for _, s := range specs {
			if _, err := c.Submit(ctx, s, client.SubmitOptions{}); err != nil {
				t.Fatalf("submit %s: %v", s.Name, err)
			}
		}
	}
	waitRunning := func(ids ...gangway.JobID) {
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(300 * time.Millisecond) {
			n := 0
			for _, id := range ids {
				if s, err := c.Status(ctx, id); err == nil && s.Phase == gangway.PhaseRunning {
					n++
				}
			}
			if n == len(ids) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v not all running after 90s", ids)
			}
		}
	}
	// The whole nodes first, so the 6-GPU jobs land on the other two.
	submit(job("vision-train", "vision", 1, 8, "", 100*time.Second, 4*time.Minute),
		job("research-run", "research", 1, 8, "", 130*time.Second, 4*time.Minute))
	waitRunning("vision-train", "research-run")
	submit(job("nlp-a", "nlp", 1, 6, "", 60*time.Second, 20*time.Minute),
		job("nlp-b", "nlp", 1, 6, "", 200*time.Second, 20*time.Minute))
	waitRunning("nlp-a", "nlp-b")
	submit(job("big-gang", "research", 2, 8, gangway.PriorityHigh, time.Minute, time.Hour),
		job("nlp-one", "nlp", 1, 4, "", time.Minute, time.Hour),
		job("vision-eval", "vision", 1, 2, "", time.Minute, time.Hour))

	// Each waits, with its reason and an estimate. The jobs big-gang and
	// nlp-one wait for depend on which whole nodes the forecast has the
	// gang take: the first two to empty by the learned runtimes (nlp-a's
	// and vision-train's; nlp-one then starts on research-run's), or the
	// two its reservation holds by max runtimes (vision-train's and
	// research-run's; nlp-one then starts on nlp-a's). Either way each
	// names only the jobs whose end frees its GPUs, never nlp-b, the last
	// to end.
	want := map[gangway.JobID]struct {
		reason   placement.Reason
		waitsFor [][]gangway.JobID // any one of these
	}{
		"big-gang":    {placement.ReasonReservation, [][]gangway.JobID{{"nlp-a", "vision-train"}, {"research-run", "vision-train"}}},
		"nlp-one":     {placement.ReasonFragmented, [][]gangway.JobID{{"research-run"}, {"nlp-a"}}},
		"vision-eval": {placement.ReasonQuota, [][]gangway.JobID{{"vision-train"}}},
	}
	got := map[gangway.JobID]client.JobStatus{}
	for deadline := time.Now().Add(60 * time.Second); len(got) < len(want); time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 60s only %d of the three wait with an estimate", len(got))
		}
		for id := range want {
			s, err := c.Status(ctx, id)
			if err == nil && s.Waiting != nil && s.Waiting.ETA != nil && s.Waiting.Cloud != nil {
				got[id] = s
			}
		}
	}
	now := time.Now()
	for _, id := range []gangway.JobID{"vision-eval", "nlp-one", "big-gang"} {
		s := got[id]
		var b strings.Builder
		if err := s.WriteWhy(&b, now); err != nil {
			t.Fatal(err)
		}
		t.Logf("$ gangway why %s\n%s", id, b.String())
		w, wnt := s.Waiting, want[id]
		if w.Reason != string(wnt.reason) {
			t.Errorf("%s waits for %s, want %s", id, w.Reason, wnt.reason)
		}
		slices.Sort(w.WaitsFor)
		if !slices.ContainsFunc(wnt.waitsFor, func(ids []gangway.JobID) bool { return slices.Equal(w.WaitsFor, ids) }) {
			t.Errorf("%s waits for jobs %v, want one of %v", id, w.WaitsFor, wnt.waitsFor)
		}
		if w.ETA.P50.Before(now.Add(-5*time.Second)) || w.ETA.P50.After(now.Add(4*time.Minute)) || w.ETA.P90.Before(w.ETA.P50) {
			t.Errorf("%s: ETA P50 %s, P90 %s: want P50 within the next few minutes, P90 no sooner", id, w.ETA.P50, w.ETA.P90)
		}
		if w.Cloud.Pool != "fake-h100-spot" || w.Cloud.ExpectedCost <= 0 || w.Cloud.BurstEnabled {
			t.Errorf("%s: cloud option %+v, want fake-h100-spot priced, burst not enabled", id, *w.Cloud)
		}
	}
	// The gang and nlp-one start on different nodes.
	for _, j := range got["nlp-one"].Waiting.WaitsFor {
		if slices.Contains(got["big-gang"].Waiting.WaitsFor, j) {
			t.Errorf("big-gang and nlp-one both wait for %s: they cannot both start on its node", j)
		}
	}
	// A running job's numbers are live.
	if s, err := c.Status(ctx, "vision-train"); err != nil || s.RunTime <= 0 || s.GPUSeconds <= 0 {
		t.Errorf("vision-train running: run %s, %0.f GPU-seconds (%v); want them so far", s.RunTime, s.GPUSeconds, err)
	}
	for _, id := range []gangway.JobID{"big-gang", "nlp-one", "vision-eval", "vision-train", "research-run", "nlp-a", "nlp-b"} {
		if err := c.Cancel(ctx, id); err != nil {
			t.Errorf("cancel %s: %v", id, err)
		}
	}
}
