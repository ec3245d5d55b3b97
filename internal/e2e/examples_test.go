package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// TestExamplesOnDevStack submits every file in examples/, as it is, with
// `gangway submit FILE --wait`, all at once, to a stack shaped like `gangway
// dev`'s: four simulated 8 × H100 nodes two to a rack whose GPUs report 0%
// utilization, and a fake cloud with an A100 spot and an A100 on-demand
// pool inside `gangway server`. The examples run `gangway demo-train` from
// PATH, as on the dev stack. Each ends as examples/README.md says: every
// one Succeeded (the burst on the fake spot pool, the crashed one resumed
// from its checkpoint), except the idle notebook, reclaimed by its idle
// policy: Cancelled, and its `submit --wait` exits non-zero saying so.
func TestExamplesOnDevStack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// The agents here and the server's fake cloud agents find gangway as
	// the examples name it.
	t.Setenv("PATH", filepath.Dir(s.bin)+string(os.PathListSeparator)+os.Getenv("PATH"))

	trace := filepath.Join(s.logDir, "spot.json")
	avail := strings.TrimSuffix(strings.Repeat("4,", 600), ",")
	if err := os.WriteFile(trace, []byte(`{"metadata":{"gap_seconds":2},"data":[`+avail+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(s.logDir, "gangway.yaml")
	if err := os.WriteFile(config, []byte(cloudConfig(s.CheckpointURL, trace, "4s")), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &record{}
	fleet := agent.InRacks(agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 4, GPUs: 8, Model: "H100"}}), 2)
	for _, n := range fleet {
		s.startAgent(n, fullstack.SimulatedGPUs(agent.Config{Node: n, Recorder: rec}))
	}
	apiURL := s.startAPIServer(ctx, "--config", config)
	token := s.token("examples", nil, true)
	view := s.View
	waitFor(t, ctx, "nodes registered and cloud offers published", func() bool {
		nodes, err := view.FleetNodes(ctx)
		offers, oerr := view.CloudOffers(ctx)
		return err == nil && oerr == nil && len(nodes) == len(fleet) && len(offers) == 2
	})

	files, err := filepath.Glob(filepath.Join(repoRoot(t), "examples", "*.yaml"))
	if err != nil || len(files) < 6 {
		t.Fatalf("examples: %d files, %v", len(files), err)
	}
	type run struct {
		file           string
		stdout, stderr bytes.Buffer
		code           int
	}
	runs := make([]*run, len(files))
	var wg sync.WaitGroup
	start := time.Now()
	for i, f := range files {
		r := &run{file: f}
		runs[i] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, s.bin, "submit", f, "--wait", "--api", apiURL, "--token", token)
			cmd.Stdout, cmd.Stderr = &r.stdout, &r.stderr
			var exit *exec.ExitError
			if err := cmd.Run(); errors.As(err, &exit) {
				r.code = exit.ExitCode()
			} else if err != nil {
				r.code = -1
				r.stderr.WriteString(err.Error())
			}
		}()
	}
	wg.Wait()
	t.Logf("%d examples ended in %v", len(files), time.Since(start).Round(100*time.Millisecond))

	cl := client.New(jobs.New(s.TemporalClient), view)
	for _, r := range runs {
		name := strings.TrimSuffix(filepath.Base(r.file), ".yaml")
		t.Run(name, func(t *testing.T) {
			st, err := cl.Status(ctx, name)
			if err != nil {
				t.Fatalf("status: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout.String(), r.stderr.String())
			}
			wantPhase, wantCode := gangway.PhaseSucceeded, 0
			if name == "notebook-idle" {
				wantPhase, wantCode = gangway.PhaseCancelled, 1
			}
			if st.Phase != wantPhase || r.code != wantCode {
				t.Fatalf("%s, exit %d; want %s, exit %d (%s)\nstdout:\n%s\nstderr:\n%s", st.Phase, r.code, wantPhase, wantCode,
					st.Reason, r.stdout.String(), r.stderr.String())
			}
			// submit --wait shows progress on stderr and the result on stdout.
			if !strings.Contains(r.stderr.String(), "Running") || !strings.Contains(r.stdout.String(), "Phase:     "+string(wantPhase)) {
				t.Errorf("submit --wait output lacks progress or result:\nstdout:\n%s\nstderr:\n%s", r.stdout.String(), r.stderr.String())
			}
			last := st.Attempts[len(st.Attempts)-1]
			switch name {
			case "burst-spot":
				if last.CapacityType != gangway.CapacitySpot || last.Pool != "fake-spot" {
					t.Errorf("ran on %s/%s, want the fake spot pool", last.Pool, last.CapacityType)
				}
			case "checkpoint-resume":
				if len(st.Attempts) != 2 || last.ResumedFrom == nil || last.ResumedFrom.Step == nil || *last.ResumedFrom.Step == 0 ||
					st.Attempts[0].Ended != workflows.CauseFailed || st.UserRetries != 1 {
					t.Errorf("runs %+v: want a failed run, then one resumed from a checkpoint", st.Attempts)
				}
			case "gang-h100":
				racks := map[string]bool{}
				for _, m := range st.Assignment.Members {
					for _, n := range fleet {
						if n.ID == m.NodeID {
							racks[n.Rack] = true
						}
					}
				}
				if len(st.Assignment.Members) != 2 || len(racks) != 1 {
					t.Errorf("placed on %+v (racks %v), want two nodes of one rack", st.Assignment.Members, racks)
				}
			case "notebook-idle":
				if last.Ended != workflows.CauseIdle || !strings.Contains(r.stderr.String(), "idle for 15s") {
					t.Errorf("ended %q; stderr %q: want reclaimed as idle", last.Ended, r.stderr.String())
				}
			default:
				if last.CapacityType != gangway.CapacityOnPrem {
					t.Errorf("ran on %s/%s, want on-prem", last.Pool, last.CapacityType)
				}
			}
		})
	}
	rec.checkNoDoubleBooking(t)
}
