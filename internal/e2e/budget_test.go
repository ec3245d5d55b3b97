package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// TestBudgetOnRealServers: a team's monthly cloud budget holds against
// what its bursts are expected to cost, not only against what the ledger
// has billed. The one on-prem node is busy for half a minute; two jobs of
// one team, each expected to cost about $0.20 on on-demand, have $0.30 of
// budget: one bursts, the other waits and says why, while the first
// launches and runs (its cost is in no ledger yet); once the first is
// billed at what it really cost (about a third of the estimate), the
// second fits again.
func TestBudgetOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	config := filepath.Join(s.logDir, "gangway.yaml")
	if err := os.WriteFile(config, []byte(`cloud:
  burstAfter: 1s
  reconcileInterval: 1s
  orphanGrace: 1m
  offersTTL: 1s
  teams:
    research: {monthlyBudget: 0.30}
`+fakeOnDemand), 0o644); err != nil {
		t.Fatal(err)
	}
	s.startAgent(agent.FakeNode("node-0", "onprem", "127.0.0.1", 8, "H100"), agent.Config{})
	waitFor(t, ctx, "node registered", func() bool {
		nodes, err := s.View.FleetNodes(ctx)
		return err == nil && len(nodes) == 1
	})
	s.startServer("--config", config)
	cl := client.New(jobs.New(s.TemporalClient), s.View)
	hog := spec("onprem-hog", "vision", 1, 8, s.bin, 300) // 30 s
	hog.MaxRuntime = gangway.Duration{Duration: 2 * time.Minute}
	if _, err := cl.Submit(ctx, hog, cloudTiming); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the hog running", func() bool {
		st, err := cl.Status(ctx, hog.Name)
		return err == nil && st.Phase == gangway.PhaseRunning
	})
	var ids []string
	for _, name := range []string{"research-a", "research-b"} {
		sp := spec(name, "research", 1, 8, s.bin, 100) // 10 s of work
		// $24 an hour for 30 s: $0.20 expected.
		sp.EstimatedRuntime, sp.MaxRuntime = gangway.Duration{Duration: 30 * time.Second}, gangway.Duration{Duration: time.Minute}
		sp.Burst = gangway.Burst{Enabled: true}
		if _, err := cl.Submit(ctx, sp, cloudTiming); err != nil {
			t.Fatalf("submit %s: %v", name, err)
		}
		ids = append(ids, name)
	}

	// One bursts; the other waits for the budget while the first is
	// launching or running, and says so.
	var first, second string
	waitFor(t, ctx, "one job bursting and the other held by the budget", func() bool {
		for i, id := range ids {
			st, err := cl.Status(ctx, id)
			if err != nil || st.Phase == gangway.PhaseQueued {
				continue
			}
			w, err := cl.Waiting(ctx, ids[1-i])
			if err == nil && w != nil && strings.Contains(w.Detail, "not bursting: team research has $") {
				first, second = id, ids[1-i]
				t.Logf("%s %s; %s waits: %s", id, st.Phase, second, w.Detail)
				return true
			}
		}
		return false
	})
	res, err := cl.Result(ctx, first)
	if err != nil || res.Phase != gangway.PhaseSucceeded {
		t.Fatalf("%s: %s %q (err %v)", first, res.Phase, res.Reason, err)
	}
	billed := res.Dollars
	// Until the first is billed, the second has not burst.
	if st, err := cl.Status(ctx, second); err != nil || len(st.Attempts) > 0 && st.Attempts[0].StartedAt.Before(res.Attempts[len(res.Attempts)-1].EndedAt) {
		t.Errorf("%s started before %s was billed: %+v (err %v)", second, first, st.Attempts, err)
	}
	res2, err := cl.Result(ctx, second)
	if err != nil || res2.Phase != gangway.PhaseSucceeded {
		t.Fatalf("%s: %s %q (err %v)", second, res2.Phase, res2.Reason, err)
	}
	// It bursts once the first is billed, unless the hog has ended by then
	// on a slow machine and it went on-prem.
	last := res2.Attempts[len(res2.Attempts)-1]
	cloud := 0.0
	for _, r := range []workflows.Status{res, res2} {
		for _, a := range r.Attempts {
			if a.CapacityType.Cloud() {
				cloud += a.Dollars
			}
		}
	}
	if cloud > 0.30 {
		t.Errorf("the team spent $%.3f of its $0.30 cloud budget", cloud)
	}
	t.Logf("billed: %s $%.3f, %s $%.3f on %s (cloud budget $0.30, each expected $0.20)", first, billed, second, res2.Dollars, last.CapacityType)
}
