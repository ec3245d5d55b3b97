package spotpolicy_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

// avail builds a trace's availability from runs: "10u 5d 3u" is ten ticks
// up, five down, three up.
func avail(t *testing.T, runs string) []int {
	t.Helper()
	var out []int
	for _, r := range strings.Fields(runs) {
		var n int
		for _, c := range r[:len(r)-1] {
			n = 10*n + int(c-'0')
		}
		v := 0
		if r[len(r)-1] == 'u' {
			v = 1
		}
		for range n {
			out = append(out, v)
		}
	}
	return out
}

func TestSimulate(t *testing.T) {
	// Six-minute ticks; a 2h job due at 4h with 12-minute changeovers
	// (two ticks); on-demand $1/h, spot $0.30/h.
	const gap = 6 * time.Minute
	job := spotpolicy.Job{Work: 2 * time.Hour, Deadline: 4 * time.Hour, Overhead: 12 * time.Minute}
	h := func(x float64) time.Duration { return time.Duration(math.Round(x * float64(time.Hour))) }
	tests := map[string]struct {
		runs   string
		prices []float64
		job    spotpolicy.Job
		policy spotpolicy.Policy
		start  int
		want   spotpolicy.Run
	}{
		"on-demand: one changeover and the work, every tick charged": {
			runs: "100u", policy: spotpolicy.OnDemandOnly{},
			want: spotpolicy.Run{Cost: 2.2, Finished: true, MetDeadline: true, FinishedAt: h(2.2), OnDemandTime: h(2.2), Changeovers: 1},
		},
		"spot all along: the same ticks at the spot price": {
			runs: "100u", policy: spotpolicy.Greedy{},
			want: spotpolicy.Run{Cost: 0.66, Finished: true, MetDeadline: true, FinishedAt: h(2.2), SpotTime: h(2.2), Changeovers: 1},
		},
		"trace prices are charged as they come": {
			runs: "100u", prices: append(repeat(0.5, 10), repeat(0.1, 90)...), policy: spotpolicy.Greedy{},
			want: spotpolicy.Run{Cost: 10*0.05 + 12*0.01, Finished: true, MetDeadline: true, FinishedAt: h(2.2), SpotTime: h(2.2), Changeovers: 1},
		},
		"no spot: greedy waits while waiting keeps two changeovers of slack, then on-demand": {
			runs: "100d", policy: spotpolicy.Greedy{},
			want: spotpolicy.Run{Cost: 2.2, Finished: true, MetDeadline: true, FinishedAt: h(3.8), OnDemandTime: h(2.2), Changeovers: 1},
		},
		"preempted once: the new instance pays its changeover again": {
			runs: "10u 5d 85u", policy: spotpolicy.Greedy{},
			// 0.2h changeover + 0.8h work, preempted at 1h, back at 1.5h:
			// 0.2h changeover + 1.2h work.
			want: spotpolicy.Run{Cost: 2.4 * 0.3, Finished: true, MetDeadline: true, FinishedAt: h(2.9), SpotTime: h(2.4), Changeovers: 2, Preemptions: 1},
		},
		"preempted with slack for one changeover only: straight to on-demand": {
			runs: "10u 100d", job: spotpolicy.Job{Work: 2 * time.Hour, Deadline: h(2.6), Overhead: 12 * time.Minute}, policy: spotpolicy.Greedy{},
			// slack 0.6h; preempted at 1h with 1.2h left: slack 0.4h.
			want: spotpolicy.Run{Cost: 0.3 + 1.4, Finished: true, MetDeadline: true, FinishedAt: h(2.4), SpotTime: h(1), OnDemandTime: h(1.4), Changeovers: 2, Preemptions: 1},
		},
		"no spot: uniform progress catches up on on-demand, idles once 2d ahead, and starts again": {
			runs: "100d", policy: spotpolicy.UniformProgress{},
			// The line is work/2 per hour: on-demand 0.1h-1h, 1.5h-2.4h
			// and 2.9h-3.7h.
			want: spotpolicy.Run{Cost: 2.6, Finished: true, MetDeadline: true, FinishedAt: h(3.7), OnDemandTime: h(2.6), Changeovers: 3},
		},
		"no spot: gangway keeps its on-demand instance": {
			runs: "100d", policy: spotpolicy.DefaultGangway(),
			want: spotpolicy.Run{Cost: 2.2, Finished: true, MetDeadline: true, FinishedAt: h(2.3), OnDemandTime: h(2.2), Changeovers: 1},
		},
		"a deadline shorter than the work is missed, and the job still finishes": {
			runs: "100d", job: spotpolicy.Job{Work: 2 * time.Hour, Deadline: time.Hour, Overhead: 12 * time.Minute}, policy: spotpolicy.DefaultGangway(),
			want: spotpolicy.Run{Cost: 2.2, Finished: true, FinishedAt: h(2.2), OnDemandTime: h(2.2), Changeovers: 1},
		},
		"a policy that never runs the job gives up at the horizon": {
			runs: "100u", policy: never{},
			want: spotpolicy.Run{FinishedAt: h(4 + 2 + 0.4)},
		},
		"the trace wraps around its end": {
			runs: "5d 95u", policy: spotpolicy.Greedy{}, start: 95,
			// Up 95-99, down 0-4 (0.5h-1h), up again.
			want: spotpolicy.Run{Start: h(9.5), Cost: 0.3 * 2.4, Finished: true, MetDeadline: true, FinishedAt: h(2.9), SpotTime: h(2.4), Changeovers: 2, Preemptions: 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			j := job
			if tc.job != (spotpolicy.Job{}) {
				j = tc.job
			}
			sim := &spotpolicy.Sim{Trace: &spotpolicy.Trace{Name: "test", Gap: gap, Available: avail(t, tc.runs), Prices: tc.prices},
				Job: j, OnDemandPrice: 1, SpotFraction: 0.3}
			if err := sim.Validate(); err != nil {
				t.Fatal(err)
			}
			got := sim.Simulate(tc.policy, tc.start)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("Simulate (-want +got):\n%s", diff)
			}
		})
	}
}

func repeat(x float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = x
	}
	return out
}

// never waits for ever, even past its deadline.
type never struct{}

func (never) Name() string                              { return "never" }
func (never) Decide(spotpolicy.State) spotpolicy.Choice { return spotpolicy.Wait }

// TestPoliciesMeetDeadlines: on any trace, every policy meets any deadline
// that leaves room for one changeover, and never pays more than on-demand
// for a tick it holds.
func TestPoliciesMeetDeadlines(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gap := time.Duration(rapid.IntRange(10, 600).Draw(t, "gap seconds")) * time.Second
		overhead := time.Duration(rapid.IntRange(0, 60).Draw(t, "overhead minutes")) * time.Minute
		work := time.Duration(rapid.IntRange(1, 48*60).Draw(t, "work minutes")) * time.Minute
		slack := time.Duration(rapid.Int64Range(int64(overhead), int64(overhead+24*time.Hour)).Draw(t, "slack"))
		job := spotpolicy.Job{Work: work, Deadline: work + slack, Overhead: overhead}
		var available []int
		for len(available) < 2*int((job.Deadline+gap-1)/gap) {
			n := rapid.IntRange(1, 300).Draw(t, "run")
			v := rapid.IntRange(0, 1).Draw(t, "up")
			for range n {
				available = append(available, v)
			}
		}
		sim := &spotpolicy.Sim{Trace: &spotpolicy.Trace{Name: "random", Gap: gap, Available: available}, Job: job, OnDemandPrice: 1, SpotFraction: 0.3}
		if err := sim.Validate(); err != nil {
			t.Fatal(err)
		}
		start := rapid.IntRange(0, len(available)-1).Draw(t, "start")
		for _, name := range spotpolicy.Names() {
			p, _ := spotpolicy.ByName(name)
			run := sim.Simulate(p, start)
			if !run.MetDeadline {
				t.Fatalf("%s missed the deadline %v: %+v", name, job.Deadline, run)
			}
			held := (run.SpotTime + run.OnDemandTime).Hours()
			if run.Cost > held*1+1e-9 || run.Cost < held*0.3-1e-9 {
				t.Fatalf("%s: cost %g for %.3fh held", name, run.Cost, held)
			}
			if name == spotpolicy.NameOnDemand {
				ticks := math.Ceil(float64(work+overhead) / float64(gap))
				if want := ticks * gap.Hours(); math.Abs(run.Cost-want) > 1e-9 || run.FinishedAt != work+overhead {
					t.Fatalf("on-demand: cost %g finished at %v, want %g at %v", run.Cost, run.FinishedAt, want, work+overhead)
				}
			}
		}
	})
}

func TestStarts(t *testing.T) {
	sim := &spotpolicy.Sim{Trace: &spotpolicy.Trace{Name: "a", Gap: time.Hour, Available: make([]int, 100)},
		Job: spotpolicy.Job{Work: 48 * time.Hour, Deadline: 72 * time.Hour}}
	starts, err := sim.Starts(1000, 7)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, s := range starts {
		if s < 0 || s > 28 {
			t.Fatalf("start %d: the deadline would run past the trace's 100 ticks", s)
		}
		seen[s] = true
	}
	if len(seen) != 29 {
		t.Errorf("1000 draws hit %d of the 29 possible starts", len(seen))
	}
	again, _ := sim.Starts(1000, 7)
	if diff := cmp.Diff(starts, again); diff != "" {
		t.Errorf("same seed, other starts (-first +second):\n%s", diff)
	}
	other, _ := sim.Starts(1000, 8)
	if cmp.Equal(starts, other) {
		t.Error("seeds 7 and 8 drew the same starts")
	}
	sim.Trace.Name = "b"
	if renamed, _ := sim.Starts(1000, 7); cmp.Equal(starts, renamed) {
		t.Error("traces a and b drew the same starts")
	}

	sim.Job.Deadline = 101 * time.Hour
	if _, err := sim.Starts(1, 7); err == nil || err.Error() != "spot trace b covers 100h0m0s, less than the job's deadline 101h0m0s" {
		t.Errorf("Starts on a short trace: %v", err)
	}
}

func TestSimValidate(t *testing.T) {
	good := func() *spotpolicy.Sim {
		return &spotpolicy.Sim{Trace: &spotpolicy.Trace{Name: "t.json", Gap: time.Minute, Available: []int{1, 0}},
			Job: spotpolicy.Job{Work: time.Hour, Deadline: 2 * time.Hour, Overhead: time.Minute}, OnDemandPrice: 3, SpotFraction: 0.3}
	}
	tests := map[string]struct {
		edit    func(*spotpolicy.Sim)
		wantErr string
	}{
		"valid":        {edit: func(*spotpolicy.Sim) {}},
		"no trace":     {edit: func(s *spotpolicy.Sim) { s.Trace = nil }, wantErr: "no spot trace"},
		"no ticks":     {edit: func(s *spotpolicy.Sim) { s.Trace.Available = nil }, wantErr: "spot trace t.json: no ticks"},
		"zero gap":     {edit: func(s *spotpolicy.Sim) { s.Trace.Gap = 0 }, wantErr: "spot trace t.json: tick length 0s: want a positive duration"},
		"short prices": {edit: func(s *spotpolicy.Sim) { s.Trace.Prices = []float64{1} }, wantErr: "spot trace t.json: 1 prices for 2 ticks; want one per tick"},
		"no work":      {edit: func(s *spotpolicy.Sim) { s.Job.Work = 0 }, wantErr: "job work 0s: want a positive duration"},
		"no deadline":  {edit: func(s *spotpolicy.Sim) { s.Job.Deadline = -time.Hour }, wantErr: "job deadline -1h0m0s: want a positive duration"},
		"negative overhead": {edit: func(s *spotpolicy.Sim) { s.Job.Overhead = -time.Minute },
			wantErr: "job changeover overhead -1m0s: want 0 or more"},
		"free on-demand": {edit: func(s *spotpolicy.Sim) { s.OnDemandPrice = 0 }, wantErr: "on-demand price 0: want a positive price"},
		"no spot price": {edit: func(s *spotpolicy.Sim) { s.SpotFraction = 0 },
			wantErr: "spot trace t.json has no prices and the spot fraction is 0: want a positive fraction of the on-demand price"},
		"trace prices need no fraction": {edit: func(s *spotpolicy.Sim) { s.SpotFraction, s.Trace.Prices = 0, []float64{1, 1} }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := good()
			tc.edit(s)
			err := s.Validate()
			if got := errString(err); got != tc.wantErr {
				t.Errorf("Validate() = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestSimulateGang: a job of k instances runs on spot only while the pool
// has k available, is preempted when it has fewer, and pays per instance.
func TestSimulateGang(t *testing.T) {
	const gap = 6 * time.Minute
	h := func(x float64) time.Duration { return time.Duration(math.Round(x * float64(time.Hour))) }
	// A 1h job due at 3h, 6-minute changeovers (one tick).
	job := func(k int) spotpolicy.Job {
		return spotpolicy.Job{Work: time.Hour, Deadline: 3 * time.Hour, Overhead: gap, Instances: k}
	}
	pool := func(counts ...[2]int) []int { // {instances, ticks}
		var out []int
		for _, c := range counts {
			for range c[1] {
				out = append(out, c[0])
			}
		}
		return out
	}
	tests := map[string]struct {
		available []int
		job       spotpolicy.Job
		policy    spotpolicy.Policy
		want      spotpolicy.Run
	}{
		"one instance needs one of four": {
			available: pool([2]int{1, 50}), job: job(1), policy: spotpolicy.Greedy{},
			want: spotpolicy.Run{Cost: 1.1 * 0.3, Finished: true, MetDeadline: true, FinishedAt: h(1.1), SpotTime: h(1.1), Changeovers: 1},
		},
		"four instances wait while three are there": {
			available: pool([2]int{3, 5}, [2]int{4, 45}), job: job(4), policy: spotpolicy.Greedy{},
			want: spotpolicy.Run{Cost: 4 * 1.1 * 0.3, Finished: true, MetDeadline: true, FinishedAt: h(1.6), SpotTime: h(1.1), Changeovers: 1},
		},
		"losing one of four preempts the gang": {
			// Up with 4 for 0.5h (a changeover and 0.4h of work), 2 for
			// 0.3h, then 4 again: a changeover and the 0.6h left.
			available: pool([2]int{4, 5}, [2]int{2, 3}, [2]int{4, 42}), job: job(4), policy: spotpolicy.Greedy{},
			want: spotpolicy.Run{Cost: 4 * 1.2 * 0.3, Finished: true, MetDeadline: true, FinishedAt: h(1.5), SpotTime: h(1.2), Changeovers: 2, Preemptions: 1},
		},
		"on-demand pays for every instance": {
			available: pool([2]int{0, 50}), job: job(3), policy: spotpolicy.OnDemandOnly{},
			want: spotpolicy.Run{Cost: 3 * 1.1, Finished: true, MetDeadline: true, FinishedAt: h(1.1), OnDemandTime: h(1.1), Changeovers: 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sim := &spotpolicy.Sim{Trace: &spotpolicy.Trace{Name: "pool", Gap: gap, Available: tc.available}, Job: tc.job, OnDemandPrice: 1, SpotFraction: 0.3}
			if err := sim.Validate(); err != nil {
				t.Fatal(err)
			}
			got := sim.Simulate(tc.policy, 0)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("Simulate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestZoneSimulate: across zones, a policy follows spot where it is, a
// move to another zone paying the move delay on top of the changeover.
func TestZoneSimulate(t *testing.T) {
	const gap = 6 * time.Minute
	h := func(x float64) time.Duration { return time.Duration(math.Round(x * float64(time.Hour))) }
	// A 2h job due at 4h, 6-minute changeovers, 6-minute moves.
	job := spotpolicy.Job{Work: 2 * time.Hour, Deadline: 4 * time.Hour, Overhead: gap}
	tests := map[string]struct {
		a, b   string
		policy spotpolicy.ZonePolicy
		want   spotpolicy.Run
	}{
		"spot in the first zone throughout: no move": {
			a: "100u", b: "100d", policy: spotpolicy.MultiZone(),
			want: spotpolicy.Run{Cost: 2.1 * 0.3, Finished: true, MetDeadline: true, FinishedAt: h(2.1), SpotTime: h(2.1), Changeovers: 1},
		},
		"spot only in the second zone: it starts there, no move to pay": {
			a: "100d", b: "100u", policy: spotpolicy.MultiZone(),
			want: spotpolicy.Run{Cost: 2.1 * 0.3, Finished: true, MetDeadline: true, FinishedAt: h(2.1), SpotTime: h(2.1), Changeovers: 1},
		},
		"preempted in one zone, it moves to the other": {
			// 1h in a (0.1h changeover, 0.9h work), then b: 0.1h
			// changeover + 0.1h move + 1.1h work.
			a: "10u 90d", b: "5d 95u", policy: spotpolicy.MultiZone(),
			want: spotpolicy.Run{Cost: 2.3 * 0.3, Finished: true, MetDeadline: true, FinishedAt: h(2.3), SpotTime: h(2.3), Changeovers: 2, Preemptions: 1, Moves: 1},
		},
		"starting, it takes the zone whose spot has lasted longest": {
			a: "10u 90d", b: "100u", policy: spotpolicy.MultiZone(),
			want: spotpolicy.Run{Cost: 2.1 * 0.3, Finished: true, MetDeadline: true, FinishedAt: h(2.1), SpotTime: h(2.1), Changeovers: 1},
		},
		"round robin moves as well": {
			a: "10u 90d", b: "5d 95u", policy: spotpolicy.RoundRobin(),
			want: spotpolicy.Run{Cost: 2.3 * 0.3, Finished: true, MetDeadline: true, FinishedAt: h(2.3), SpotTime: h(2.3), Changeovers: 2, Preemptions: 1, Moves: 1},
		},
		"one zone alone waits for its spot to come back": {
			a: "10u 5d 85u", b: "100d", policy: spotpolicy.OneZone{Policy: spotpolicy.Greedy{}},
			want: spotpolicy.Run{Cost: 2.2 * 0.3, Finished: true, MetDeadline: true, FinishedAt: h(2.7), SpotTime: h(2.2), Changeovers: 2, Preemptions: 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			z := &spotpolicy.ZoneSim{Zones: []*spotpolicy.Trace{{Name: "a", Gap: gap, Available: avail(t, tc.a)}, {Name: "b", Gap: gap, Available: avail(t, tc.b)}},
				Job: job, Move: gap, OnDemandPrice: 1, SpotFraction: 0.3}
			if err := z.Validate(); err != nil {
				t.Fatal(err)
			}
			got := z.Simulate(tc.policy, 0)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("Simulate (-want +got):\n%s", diff)
			}
		})
	}
	bad := &spotpolicy.ZoneSim{Zones: []*spotpolicy.Trace{{Name: "a", Gap: gap, Available: []int{1}}, {Name: "b", Gap: time.Minute, Available: []int{1}}},
		Job: job, OnDemandPrice: 1, SpotFraction: 0.3}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "must share a tick length") {
		t.Errorf("zones of other tick lengths: %v", err)
	}
}
