package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

// gpuNode is one node of n GPUs of model "A", plenty of CPU and memory.
func gpuNode(id string, n int) placement.Node {
	nd := placement.Node{ID: id, Pool: "p", Model: "A", CPUMilli: 64000, MemMiB: 1 << 20, Schedulable: true,
		GPUs: make([]placement.GPU, n)}
	for i := range nd.GPUs {
		nd.GPUs[i] = placement.GPU{Index: i, Model: "A", Healthy: true}
	}
	return nd
}

func gang(id string, submit, dur, gpus int) TraceJob {
	return TraceJob{Job: gangway.QueueEntry{JobID: id, Replicas: 1, GPUsPerReplica: gpus},
		Submit: time.Duration(submit) * time.Second, Duration: time.Duration(dur) * time.Second}
}

func firstFitOnly(string) (placement.Scorer, error) { return placement.FirstFit{}, nil }

func runOne(t *testing.T, cfg TraceConfig) TraceRun {
	t.Helper()
	if cfg.Policies == nil {
		cfg.Policies = []string{"first-fit"}
	}
	if cfg.NewScorer == nil {
		cfg.NewScorer = firstFitOnly
	}
	res, err := RunTrace(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res.Runs[0]
}

// replayWant is what the hand-computed tests check of a run.
type replayWant struct {
	Waits                          []float64
	WaitMean, WaitP50, WaitP99     float64
	AllocMean, AllocMeanAll        float64
	Makespan                       time.Duration
	Placed, Finished, NeverPlaced  int
	Preemptions                    int
	LostGPUSeconds                 float64
	PlaceCalls, MaxQueue, Unplaced int
}

func gotOf(r TraceRun) replayWant {
	return replayWant{Waits: r.Waits, WaitMean: r.WaitMean, WaitP50: r.WaitP50, WaitP99: r.WaitP99,
		AllocMean: r.AllocMean, AllocMeanAll: r.AllocMeanAll, Makespan: r.Makespan, Placed: r.Placed,
		Finished: r.Finished, NeverPlaced: r.NeverPlaced, Preemptions: r.Preemptions, LostGPUSeconds: r.LostGPUSeconds,
		PlaceCalls: r.PlaceCalls, MaxQueue: r.MaxQueue, Unplaced: r.Unplaceable}
}

// The event loop on a two-GPU node, computed by hand.
//
//	job  submit  GPUs  duration
//	a        0     1     100 s
//	b       10     2      50 s
//	c       20     1     30 s (case "short c") or 200 s ("long c")
//
// Short c, no reservations: a runs 0-100; b does not fit and waits; c
// fits the free GPU at 20 and runs 20-50; b starts when a leaves, 100-150.
// Waits 0, 90, 0. Allocation over the arrival window 0-20 is one GPU of
// two (0.5); over the whole run 0-150: 1 GPU for 0-20, 2 for 20-50, 1 for
// 50-100, 2 for 100-150 = (20 + 60 + 50 + 100) / 2 / 150 = 0.7667.
//
// Long c with one reservation: b reserves both GPUs from when a ends (its
// declared max runtime, 100 s rounded up to 2m: t=120); c would run to
// 20+200 s (declared 4m) past that, so it may not take the free GPU and
// waits; at 100 a leaves and b (older) starts, 100-150; c runs 150-350.
// Waits 0, 90, 130. Without the reservation c takes the free GPU at 20
// and runs to 220, and b waits until then: waits 0, 210, 0.
func TestReplayHandComputed(t *testing.T) {
	nodes := []placement.Node{gpuNode("n0", 2)}
	tests := map[string]struct {
		cDuration    int
		reservations int
		want         replayWant
	}{
		"short c": {cDuration: 30, want: replayWant{
			Waits: []float64{0, 0, 90}, WaitMean: 30, WaitP50: 0, WaitP99: 90,
			AllocMean: 0.5, AllocMeanAll: 115.0 / 150, Makespan: 150 * time.Second,
			Placed: 3, Finished: 3, PlaceCalls: 5, MaxQueue: 2,
		}},
		"short c, reservations": {cDuration: 30, reservations: 1, want: replayWant{
			Waits: []float64{0, 0, 90}, WaitMean: 30, WaitP50: 0, WaitP99: 90,
			AllocMean: 0.5, AllocMeanAll: 115.0 / 150, Makespan: 150 * time.Second,
			Placed: 3, Finished: 3, PlaceCalls: 5, MaxQueue: 2,
		}},
		// Place calls at 0, 10, 20, 100 (a leaves; b still does not fit)
		// and 220 (c leaves, b starts); b leaves at 270 with nothing
		// queued: no call.
		"long c": {cDuration: 200, want: replayWant{
			Waits: []float64{0, 0, 210}, WaitMean: 70, WaitP50: 0, WaitP99: 210,
			// 0-20: 1 GPU; 20-100: 2; 100-220: 1 (c); 220-270: 2 (b).
			AllocMean: 0.5, AllocMeanAll: (20 + 160 + 120 + 100) / 2.0 / 270, Makespan: 270 * time.Second,
			Placed: 3, Finished: 3, PlaceCalls: 5, MaxQueue: 2,
		}},
		"long c, reservations": {cDuration: 200, reservations: 1, want: replayWant{
			Waits: []float64{0, 90, 130}, WaitMean: 220.0 / 3, WaitP50: 90, WaitP99: 130,
			// 0-20: 1 GPU; 20-100: 1; 100-150: 2 (b); 150-350: 1 (c).
			AllocMean: 0.5, AllocMeanAll: (100 + 100 + 200) / 2.0 / 350, Makespan: 350 * time.Second,
			Placed: 3, Finished: 3, PlaceCalls: 5, MaxQueue: 2,
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			jobs := []TraceJob{gang("a", 0, 100, 1), gang("b", 10, 50, 2), gang("c", 20, tc.cDuration, 1)}
			run := runOne(t, TraceConfig{Nodes: nodes, Jobs: jobs, Options: placement.Options{Reservations: tc.reservations}})
			if diff := cmp.Diff(tc.want, gotOf(run), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("replay (-want +got):\n%s", diff)
			}
			last := run.Series[len(run.Series)-1]
			if last.AllocMilli != 0 || last.Queue != 0 || last.Running != 0 {
				t.Errorf("last sample %+v, want an empty fleet", last)
			}
		})
	}
}

// Preemption: a best-effort job l (1 GPU, 1 h) runs from 0; at 40 min a
// high-priority job h needs the only GPU for 10 min. l is 40 min old
// (past the 10 min minimum runtime), so h preempts it: with a checkpoint
// every 30 min, l keeps 30 min of work, loses 10, and is requeued with 30
// min to go (20 left + 10 lost). h starts at once (the same instant) and
// leaves at 50 min; l restarts then and ends at 80 min. Without
// checkpoints l loses all 40 min and ends at 50 + 60 = 110 min.
func TestReplayPreemptionRequeue(t *testing.T) {
	nodes := []placement.Node{gpuNode("n0", 1)}
	tests := map[string]struct {
		checkpoint   time.Duration
		wantMakespan time.Duration
		wantLost     float64
	}{
		"checkpoint every 30m": {checkpoint: 30 * time.Minute, wantMakespan: 80 * time.Minute, wantLost: 600},
		"no checkpoints":       {checkpoint: 0, wantMakespan: 110 * time.Minute, wantLost: 2400},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := gang("l", 0, 3600, 1)
			l.Job.Preemptible = true
			h := gang("h", 2400, 600, 1)
			h.Job.Priority = 100
			run := runOne(t, TraceConfig{Nodes: nodes, Jobs: []TraceJob{l, h}, CheckpointEvery: tc.checkpoint,
				Options: placement.Options{Preempt: true, MinRuntime: 10 * time.Minute}})
			want := replayWant{
				// h waits 0; l waits from its preemption (40m) to its
				// restart (50m).
				Waits: []float64{0, 600}, WaitMean: 300, WaitP50: 0, WaitP99: 600,
				AllocMean: 1, AllocMeanAll: 1, Makespan: tc.wantMakespan,
				Placed: 2, Finished: 2, Preemptions: 1, LostGPUSeconds: tc.wantLost,
				// 0 (l starts), 40m twice (h preempts; then h starts, with
				// l queued behind it), 50m (l restarts); l's wake-up at 10m
				// finds nobody above it waiting, and its first attempt's
				// departure (at 60m) is ignored.
				PlaceCalls: 4, MaxQueue: 2,
			}
			if diff := cmp.Diff(want, gotOf(run), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("replay (-want +got):\n%s", diff)
			}
		})
	}
}

// victimAndTwo is a preemptible one-GPU job l submitted at 0 that runs lDur
// seconds, and two priority-100 one-GPU jobs h1 and h2 submitted at h1At
// and h2At that run hDur seconds each.
func victimAndTwo(lDur, h1At, h2At, hDur int) []TraceJob {
	l := gang("l", 0, lDur, 1)
	l.Job.Preemptible = true
	h1, h2 := gang("h1", h1At, hDur, 1), gang("h2", h2At, hDur, 1)
	h1.Job.Priority, h2.Job.Priority = 100, 100
	return []TraceJob{l, h1, h2}
}

// A preempted job that is preempted again is still a victim candidate: its
// next attempt runs under the same job ID, and the loop signals it again
// once its re-signal interval has passed.
func TestReplayPreemptedTwice(t *testing.T) {
	nodes := []placement.Node{gpuNode("n0", 1)}
	run := runOne(t, TraceConfig{Nodes: nodes, Jobs: victimAndTwo(7200, 1200, 3600, 600),
		Options: placement.Options{Preempt: true, MinRuntime: 10 * time.Minute}})
	// No checkpoints: l runs 0-20m, is preempted by h1 (20-30m), runs
	// 30m-60m, is preempted by h2 (60-70m), and runs its 2 h from 70m to
	// 190m.
	if run.Preemptions != 2 || run.Finished != 3 || run.Makespan != 190*time.Minute {
		t.Errorf("preemptions %d finished %d makespan %s; want 2, 3, 3h10m0s", run.Preemptions, run.Finished, run.Makespan)
	}
}

// A job that can never fit is dropped at once and counted; one that could
// fit later but is left waiting at the end counts as never placed too.
func TestReplayNeverPlaced(t *testing.T) {
	nodes := []placement.Node{gpuNode("n0", 2)}
	huge := gang("huge", 0, 10, 4)
	pinned := gang("pinned", 0, 10, 1)
	pinned.Job.GPUModels = []string{"B"}
	run := runOne(t, TraceConfig{Nodes: nodes, Jobs: []TraceJob{huge, pinned, gang("ok", 5, 10, 2)}})
	if run.NeverPlaced != 2 || run.Unplaceable != 2 || run.Placed != 1 || run.Finished != 1 || len(run.Waits) != 1 {
		t.Errorf("never placed %d unplaceable %d placed %d finished %d waits %v; want 2 2 1 1 [0]",
			run.NeverPlaced, run.Unplaceable, run.Placed, run.Finished, run.Waits)
	}
}

// Same seed, same result: every number and the whole series, for a
// policy that draws from the seeded source (random) and Gangway's.
func TestReplayDeterministic(t *testing.T) {
	nodes, tasks := loadDefault(t)
	jobs, _, err := OpenBTraceJobs(tasks[:400], tasks, 7)
	if err != nil {
		t.Fatal(err)
	}
	cfg := TraceConfig{Nodes: nodes[:40], Jobs: jobs, Policies: []string{"random", "gangway"}, NewScorer: baselines.ScorerByName,
		Options: placement.Options{Reservations: 2, Preempt: true, MinRuntime: time.Minute, Workload: TypicalWorkload(tasks, TypicalPopularity)},
		Seed:    7, CheckpointEvery: DefaultCheckpointEvery, Speedup: 3000}
	a, err := RunTrace(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunTrace(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ignore := cmpopts.IgnoreFields(TraceRun{}, "Elapsed", "PlaceTime")
	if diff := cmp.Diff(a.Runs, b.Runs, ignore, cmpopts.EquateNaNs()); diff != "" {
		t.Errorf("two runs with seed 7 differ (-first +second):\n%s", diff)
	}
	if a.Runs[0].MaxQueue < 2 {
		t.Errorf("max queue %d: the sample should queue jobs (40 nodes, speedup 3000)", a.Runs[0].MaxQueue)
	}
}

// The first 300 tasks of the default trace on its whole fleet: every
// policy places every task on arrival (the trace loads its fleet lightly),
// and the accounting adds up.
func TestReplayDefaultTraceSample(t *testing.T) {
	nodes, tasks := loadDefault(t)
	jobs, src, err := OpenBTraceJobs(tasks[:300], tasks, 42)
	if err != nil {
		t.Fatal(err)
	}
	if src.FromTrace+src.DrawnDurations != 300 || src.DrawnArrivals != 0 {
		t.Errorf("timing %+v: want 300 jobs, arrivals from the trace", src)
	}
	start := time.Now()
	res, err := RunTrace(context.Background(), TraceConfig{Nodes: nodes, Jobs: jobs, Policies: TracePolicies,
		NewScorer: baselines.ScorerByName, Seed: 42, CheckpointEvery: DefaultCheckpointEvery,
		Options: placement.Options{Reservations: 4, Preempt: true, MinRuntime: 10 * time.Minute,
			Workload: TypicalWorkload(tasks, TypicalPopularity)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if r.Placed != 300 || r.Finished != 300 || r.NeverPlaced != 0 || r.WaitP99 != 0 {
			t.Errorf("%s: placed %d finished %d never %d p99 %g; want 300 300 0 0", r.Policy, r.Placed, r.Finished, r.NeverPlaced, r.WaitP99)
		}
		if !(r.AllocMean > 0 && r.AllocMean < 0.05) {
			t.Errorf("%s: mean allocation %g, want a small positive share", r.Policy, r.AllocMean)
		}
	}
	t.Logf("4 policies x 300 tasks in %s", time.Since(start))
}

func TestOfferedLoad(t *testing.T) {
	// Two 1-GPU jobs on 2 GPUs, each started on arrival: a 0-100, b
	// 50-150. Over the arrival window, 0-50, a runs alone: 1 GPU, 50% of
	// 2; the peak is 2 GPUs (50-100), 100%.
	jobs := []TraceJob{gang("a", 0, 100, 1), gang("b", 50, 100, 1)}
	mean, peak := offeredLoad(jobs, 2)
	if math.Abs(mean-0.5) > 1e-12 || math.Abs(peak-1) > 1e-12 {
		t.Errorf("offered load %g peak %g, want 0.5 1", mean, peak)
	}
}

func TestRoundRuntime(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		0: time.Minute, time.Second: time.Minute, time.Minute: time.Minute, 61 * time.Second: 2 * time.Minute,
		100 * time.Minute: 128 * time.Minute,
	} {
		if got := RoundRuntime(in); got != want {
			t.Errorf("RoundRuntime(%s) = %s, want %s", in, got, want)
		}
	}
}

// The dispatch loop asks a victim to stop at most once per
// the dispatch loop's re-signal interval (30 s), and the replay runs the loop's rule. On
// one GPU: l (preemptible, 1 h) runs from 0; h1 (priority 100, 10 s)
// preempts it at 100 and runs 100-110; l restarts at 110. h2 (priority
// 100, 10 s) arrives at 115 and the plan chooses l again, but the loop
// asked l to stop 15 s ago: no signal until 130, when l is stopped again
// and h2 runs 130-140. l restarts at 140 and ends at 140 + 1 h (no
// checkpoints). Waits: h1 0, h2 15, l 10 + 10.
func TestReplayPreemptResignal(t *testing.T) {
	nodes := []placement.Node{gpuNode("n0", 1)}
	run := runOne(t, TraceConfig{Nodes: nodes, Jobs: victimAndTwo(3600, 100, 115, 10), Options: placement.Options{Preempt: true}})
	want := replayWant{
		Waits: []float64{0, 15, 20}, WaitMean: 35.0 / 3, WaitP50: 15, WaitP99: 20,
		AllocMean: 1, AllocMeanAll: 1, Makespan: 3740 * time.Second,
		Placed: 3, Finished: 3, Preemptions: 2, LostGPUSeconds: 100 + 20,
		// 0 (l), 100 twice (preempt; h1 starts), 110 (l restarts), 115
		// (no signal), 130 twice (preempt; h2 starts), 140 (l restarts).
		PlaceCalls: 8, MaxQueue: 2,
	}
	if diff := cmp.Diff(want, gotOf(run), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("replay (-want +got):\n%s", diff)
	}
}

// Defragmentation, by hand, on two four-GPU nodes (first-fit):
//
//	job  submit  GPUs  duration   where
//	x        0     2    1000 s    n0 [0 1]
//	y        0     3    1000 s    n1 [0 1 2]
//	a        1     1     500 s    n0 [2], preemptible
//	w       10     2     100 s
//
// At 10 two GPUs are free, one on each node: w waits, fragmented. Without
// defragmentation it starts when a ends, at 501 (wait 491). With it, a
// moves at 10 — 9 GPU-seconds since it started (no checkpoint yet, one
// every 30 minutes) plus a 30 s restart — to n1's free GPU, where it was
// reserved; w starts at 10 on n0. a's work left grows by the restart: it
// ends at 10 + 500 + 30 = 540. Both runs come from one RunTrace.
func TestReplayDefrag(t *testing.T) {
	nodes := []placement.Node{gpuNode("n0", 4), gpuNode("n1", 4)}
	a := gang("a", 1, 500, 1)
	a.Job.Preemptible = true
	jobs := []TraceJob{gang("x", 0, 1000, 2), gang("y", 0, 1000, 3), a, gang("w", 10, 100, 2)}
	res, err := RunTrace(context.Background(), TraceConfig{Nodes: nodes, Jobs: jobs, Policies: []string{"first-fit"},
		NewScorer: firstFitOnly, CheckpointEvery: 30 * time.Minute,
		Defrag: placement.Defrag{Enabled: true, MaxMovesPerHour: 4, MaxLostGPUSecondsPerHour: 1000, RestartOverhead: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Label                                     string
		Waits                                     []float64
		Moves, Preemptions                        int
		MoveLostGPUSeconds, MoveRestartGPUSeconds float64
		Makespan                                  time.Duration
	}
	var runs []got
	for _, r := range res.Runs {
		runs = append(runs, got{r.Label(), r.Waits, r.Moves, r.Preemptions, r.MoveLostGPUSeconds, r.MoveRestartGPUSeconds, r.Makespan})
	}
	want := []got{
		{Label: "first-fit", Waits: []float64{0, 0, 0, 491}, Makespan: 1000 * time.Second},
		{Label: "first-fit +defrag", Waits: []float64{0, 0, 0, 0}, Moves: 1, MoveLostGPUSeconds: 9, MoveRestartGPUSeconds: 30,
			Makespan: 1000 * time.Second},
	}
	if d := cmp.Diff(want, runs, cmpopts.EquateApprox(0, 1e-9)); d != "" {
		t.Errorf("runs (-want +got):\n%s", d)
	}
}
