package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// cloudConfig is a server config with a fake cloud: a spot pool whose
// availability follows trace and an on-demand pool, both 8 × A100.
func cloudConfig(storeURL, trace, noticeLead string) string {
	return fmt.Sprintf(`checkpoint:
  store: %s
cloud:
  burstAfter: 8s
  reconcileInterval: 1s
  orphanGrace: 1m
  offersTTL: 1s
  onPremPricePerGPUHour: {onprem: 1.5}
  providers:
    - name: fake
      type: fake
      bootDelay: 1s
      noticeLead: %s
      pools:
        - {name: fake-spot, zone: fake-1a, instanceType: a100x8, gpuModel: A100, gpus: 8, capacityType: spot, pricePerHour: 8, trace: %s}
        - {name: fake-od, zone: fake-1a, instanceType: a100x8, gpuModel: A100, gpus: 8, capacityType: on-demand, pricePerHour: 24}
`, storeURL, noticeLead, trace)
}

// fakeOnDemand ends a server config's cloud section with a fake provider
// of one on-demand pool of 8 × A100 instances at $24 an hour.
const fakeOnDemand = `  providers:
    - name: fake
      type: fake
      bootDelay: 1s
      pools:
        - {name: fake-od, zone: fake-1a, instanceType: a100x8, gpuModel: A100, gpus: 8, capacityType: on-demand, pricePerHour: 24}
`

// cloudTiming is the workflow timing of jobs that may burst to the fake
// cloud: its instances boot in a second, and 30 s bounds a launch on a
// slow machine.
var cloudTiming = client.SubmitOptions{Timing: workflows.Timing{HeartbeatTimeout: 5 * time.Second, StartTimeout: 30 * time.Second,
	BootTimeout: 30 * time.Second}}

// TestCloudOnRealServers runs Gangway's cloud half on a real Temporal and
// Redis with the fake cloud inside `gangway server`:
//
//  1. A checkpointing demo-train gang bursts to spot while on-prem is
//     busy; the spot trace then runs dry, the cloud gives its notice, the
//     gang checkpoints, its instances are terminated, and it resumes
//     on-prem from that checkpoint and finishes with exactly its step
//     count: no step lost, none done twice.
//  2. A workload that overflows the on-prem fleet bursts to on-demand and
//     completes.
//
// Afterwards no instance is left running, and the usage ledger adds up to
// every job's own result to the last bit.
func TestCloudOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	tc, view := s.TemporalClient, s.View

	storeURL := s.CheckpointURL
	// Spot is there for the first 20 s after the server starts, then gone:
	// room for a slow machine to get the gang running on spot first.
	trace := filepath.Join(s.logDir, "spot.json")
	avail := strings.Repeat("2,", 10) + strings.TrimSuffix(strings.Repeat("0,", 600), ",")
	if err := os.WriteFile(trace, []byte(`{"metadata":{"gap_seconds":2},"data":[`+avail+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// GANGWAY_E2E_CHECKPOINT_SIZE=1073741824 measures the notice path with
	// a 1 GiB checkpoint, taken only at the stop (a periodic 1 GiB save
	// every second would swamp the machine), with AWS's 2-minute notice.
	size, lead := os.Getenv("GANGWAY_E2E_CHECKPOINT_SIZE"), "4s"
	if size != "" {
		lead = "2m"
	}
	config := filepath.Join(s.logDir, "gangway.yaml")
	if err := os.WriteFile(config, []byte(cloudConfig(storeURL, trace, lead)), 0o644); err != nil {
		t.Fatal(err)
	}

	rec := &record{}
	for i := range 2 {
		s.startAgent(agent.FakeNode(fmt.Sprintf("node-%d", i), "onprem", "127.0.0.1", 8, "H100"), agent.Config{Recorder: rec})
	}
	waitFor(t, ctx, "nodes registered", func() bool {
		nodes, err := view.FleetNodes(ctx)
		return err == nil && len(nodes) == 2
	})
	metricsAddr := freeAddr(t)
	s.startServer("--config", config, "--metrics-addr", metricsAddr)

	cl := client.New(jobs.New(tc), view)
	submit := func(sp gangway.JobSpec) {
		t.Helper()
		if _, err := cl.Submit(ctx, sp, cloudTiming); err != nil {
			t.Fatalf("submit %s: %v", sp.Name, err)
		}
	}
	waitPhase := func(job string, p gangway.Phase) client.JobStatus {
		var st client.JobStatus
		waitFor(t, ctx, job+" "+string(p), func() bool {
			var err error
			st, err = cl.Status(ctx, job)
			return err == nil && st.Phase == p
		})
		return st
	}

	// 1. On-prem is busy for about 10 s (and says so: maxRuntime 15 s).
	hog := spec("onprem-hog", "vision", 2, 8, s.bin, 100)
	hog.MaxRuntime = gangway.Duration{Duration: 15 * time.Second}
	submit(hog)
	waitPhase(hog.Name, gangway.PhaseRunning)
	gang := spec("spot-gang", "nlp", 2, 8, s.bin, 600) // 30 s of work: it outlives the spot
	gang.Args = append(gang.Args, "--step-time", "50ms", "--checkpoint-every", "20")
	gang.Checkpoint.Enabled = true
	gang.Checkpoint.GracePeriod = gangway.Duration{Duration: 3 * time.Second}
	if size != "" {
		gang.Args = append(gang.Args, "--checkpoint-every", "100000", "--checkpoint-size", size)
		gang.Checkpoint.GracePeriod = gangway.Duration{Duration: time.Minute}
	}
	gang.Burst = gangway.Burst{Enabled: true, CapacityTypes: []gangway.CapacityType{gangway.CapacitySpot}}
	gang.EstimatedRuntime = gangway.Duration{Duration: 30 * time.Second}
	gang.MaxRuntime = gangway.Duration{Duration: time.Minute}
	submit(gang)

	gs, err := cl.Result(ctx, gang.Name)
	if err != nil {
		t.Fatal(err)
	}
	if gs.Phase != gangway.PhaseSucceeded || gs.UserRetries != 0 {
		t.Fatalf("%s: %s %q (user retries %d); runs %+v", gang.Name, gs.Phase, gs.Reason, gs.UserRetries, gs.Attempts)
	}
	var spotRun, resumed *workflows.AttemptRecord
	for i := range gs.Attempts {
		a := &gs.Attempts[i]
		switch {
		case a.CapacityType == gangway.CapacitySpot && a.Ended == workflows.CauseNotice:
			spotRun = a
		case a.Ended == workflows.CauseCompleted:
			resumed = a
		}
	}
	if spotRun == nil || resumed == nil {
		t.Fatalf("%s: want a spot run ended by a notice and a completed run; got %+v", gang.Name, gs.Attempts)
	}
	if resumed.Pool != "onprem" || resumed.ResumedFrom == nil || resumed.ResumedFrom.Step == nil || *resumed.ResumedFrom.Step == 0 {
		t.Errorf("the gang's last run %+v: want on-prem, resumed from a checkpoint with a step", resumed)
	}
	// Invariant 5 with a notice: the final checkpoint is taken at the stop,
	// so every step is done exactly once.
	if steps := stepsInLogs(t, ctx, view, gang.Name); steps != 600 {
		t.Errorf("%s did %d steps over its runs, want exactly 600", gang.Name, steps)
	}
	if ms, err := s.Checkpoints.List(ctx, gang.Name); err == nil && len(ms) > 0 {
		t.Logf("checkpoint size %d bytes", ms[len(ms)-1].TotalBytes)
	}
	t.Logf("spot notice: stop asked → checkpoint uploaded and gang stopped in %v; → placed and started on-prem in %v; → training again (restored, %q) in %v",
		spotRun.EndedAt.Sub(spotRun.StopRequestedAt).Round(time.Millisecond), resumed.StartedAt.Sub(spotRun.StopRequestedAt).Round(time.Millisecond),
		fmt.Sprintf("resumed from step %d", *resumed.ResumedFrom.Step), resumedAt(t, ctx, view, gang.Name, resumed.Attempt).Sub(spotRun.StopRequestedAt).Round(time.Millisecond))

	// 2. Overflow: on-prem busy again; three 8-GPU jobs may burst to
	// on-demand and finish there.
	hog2 := spec("onprem-hog-2", "vision", 2, 8, s.bin, 150)
	hog2.MaxRuntime = gangway.Duration{Duration: time.Minute}
	submit(hog2)
	waitPhase(hog2.Name, gangway.PhaseRunning)
	var burst []string
	for i := range 3 {
		sp := spec(fmt.Sprintf("overflow-%d", i), "speech", 1, 8, s.bin, 30)
		sp.Burst = gangway.Burst{Enabled: true, CapacityTypes: []gangway.CapacityType{gangway.CapacityOnDemand}}
		sp.EstimatedRuntime = gangway.Duration{Duration: 5 * time.Second}
		submit(sp)
		burst = append(burst, sp.Name)
	}
	for _, id := range burst {
		st, err := cl.Result(ctx, id)
		if err != nil || st.Phase != gangway.PhaseSucceeded {
			t.Fatalf("%s: %s %q (err %v)", id, st.Phase, st.Reason, err)
		}
		last := st.Attempts[len(st.Attempts)-1]
		if last.CapacityType != gangway.CapacityOnDemand || last.Pool != "fake-od" || st.Dollars <= 0 {
			t.Errorf("%s ran on %s/%s for $%v, want fake-od on-demand and a cost", id, last.Pool, last.CapacityType, st.Dollars)
		}
	}
	if st, err := cl.Result(ctx, hog2.Name); err != nil || st.Phase != gangway.PhaseSucceeded {
		t.Fatalf("%s: %s (err %v)", hog2.Name, st.Phase, err)
	}

	// Invariant 4: nothing is left running in the cloud, by the
	// reconciler's own count, and no cloud node is left in the view.
	waitFor(t, ctx, "no cloud instance left", func() bool {
		v, ok := scrape(metricsAddr, "gangway_cloud_instances")
		nodes, err := view.FleetNodes(ctx)
		return ok && v == 0 && err == nil && len(nodes) == 2
	})

	// The ledger (the stack's SQLite file) adds up to each job's own
	// result exactly.
	ledger := s.Ledger
	for _, id := range append([]string{hog.Name, gang.Name, hog2.Name}, burst...) {
		st, err := cl.Result(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		tot, err := ledger.PerJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tot.Dollars != st.Dollars || tot.Segments != len(st.Attempts) {
			t.Errorf("%s: ledger $%v in %d segments, job says $%v over %d runs", id, tot.Dollars, tot.Segments, st.Dollars, len(st.Attempts))
		}
	}
	rec.checkNoDoubleBooking(t)
	if *updateHistories {
		saveHistory(t, ctx, tc, gang.Name)    // burst, notice, resume from a checkpoint
		saveHistory(t, ctx, tc, "overflow-0") // burst to on-demand
	}
}

// stepsInLogs adds up the steps rank 0 did over all runs, from the
// "done: steps A..B" and "stopped: steps A..B" lines demo-train prints.
func stepsInLogs(t *testing.T, ctx context.Context, v *capacity.View, job string) int {
	t.Helper()
	lines, err := v.Logs(ctx, job, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, l := range lines {
		if l.Rank != 0 || !(strings.HasPrefix(l.Text, "done: steps ") || strings.HasPrefix(l.Text, "stopped: steps ")) {
			continue
		}
		_, r, _ := strings.Cut(l.Text, "steps ")
		r, _, _ = strings.Cut(r, " ")
		from, to, _ := strings.Cut(r, "..")
		a, _ := strconv.Atoi(from)
		b, _ := strconv.Atoi(to)
		if b >= a {
			total += b - a + 1
		}
	}
	return total
}

// resumedAt is when rank 0 of the attempt logged that it resumed: the
// checkpoint restored and the process training again.
func resumedAt(t *testing.T, ctx context.Context, v *capacity.View, job string, attempt int) time.Time {
	t.Helper()
	lines, err := v.Logs(ctx, job, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if l.Rank == 0 && l.Attempt == attempt && strings.Contains(l.Text, "resumed from step") {
			return l.Time
		}
	}
	t.Fatalf("%s attempt %d never logged that it resumed", job, attempt)
	return time.Time{}
}

// freeAddr is a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrape sums every series of one metric on a /metrics endpoint (0 when
// it has none); ok is false when the endpoint does not answer.
func scrape(addr, name string) (sum float64, ok bool) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && (f[0] == name || strings.HasPrefix(f[0], name+"{")) {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return 0, false
			}
			sum += v
		}
	}
	return sum, resp.StatusCode == http.StatusOK
}
