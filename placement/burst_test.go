package placement_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
	"github.com/gangwayhq/gangway/placement"
)

var (
	spotA100 = gangway.Offer{Provider: "fake", Pool: "fake-spot", Zone: "z1", InstanceType: "a2-8", GPUModel: "A100",
		GPUsPerInstance: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 8, InterruptionRate: 0.1}
	odA100 = gangway.Offer{Provider: "fake", Pool: "fake-od", Zone: "z1", InstanceType: "a2-8", GPUModel: "A100",
		GPUsPerInstance: 8, CapacityType: gangway.CapacityOnDemand, PricePerHour: 24}
)

func burstJob(id string, replicas int) gangway.QueueEntry {
	j := job(id).gang(replicas, 8).j
	j.MaxRuntime = 4 * time.Hour
	j.Burst = gangway.Burst{Enabled: true}
	j.Runtime, j.Checkpointable, j.CheckpointInterval = 2*time.Hour, true, 10*time.Minute
	return j
}

// burstsOf reduces a plan's bursts to job → pools in order.
func burstsOf(p placement.Plan) map[gangway.JobID][]string {
	out := map[gangway.JobID][]string{}
	for _, b := range p.Bursts {
		for _, c := range b.Offers {
			out[b.JobID] = append(out[b.JobID], c.Pool)
		}
	}
	return out
}

func TestBurst(t *testing.T) {
	// One 8-GPU node, busy for 3 more hours.
	busy := func() *fleetBuilder {
		return fleet(node("n1").gpus(8, "A100")).with(running("r1").on("n1", 0, 1, 2, 3, 4, 5, 6, 7).runtime(4 * time.Hour))
	}
	opts := placement.Options{Offers: []gangway.Offer{odA100, spotA100}, BurstAfter: 10 * time.Minute}
	tests := map[string]struct {
		fleet *fleetBuilder
		job   func() gangway.QueueEntry
		opts  func(o *placement.Options)
		want  map[gangway.JobID][]string
	}{
		"long on-prem wait bursts, spot first": {
			fleet: busy(), job: func() gangway.QueueEntry { return burstJob("j", 2) },
			want: map[gangway.JobID][]string{"j": {"fake-spot", "fake-od"}},
		},
		"no burst without the job's consent": {
			fleet: busy(), job: func() gangway.QueueEntry { j := burstJob("j", 2); j.Burst.Enabled = false; return j },
			want: map[gangway.JobID][]string{},
		},
		"a short wait does not burst": {
			fleet: busy(), job: func() gangway.QueueEntry { return burstJob("j", 1) },
			opts: func(o *placement.Options) { o.BurstAfter = 4 * time.Hour },
			want: map[gangway.JobID][]string{},
		},
		"a job that fits now is placed, not burst": {
			fleet: fleet(node("n1").gpus(8, "A100")), job: func() gangway.QueueEntry { return burstJob("j", 1) },
			want: map[gangway.JobID][]string{},
		},
		"job price cap rules out on-demand": {
			fleet: busy(), job: func() gangway.QueueEntry { j := burstJob("j", 1); j.Burst.MaxPricePerGPUHour = 2; return j },
			want: map[gangway.JobID][]string{"j": {"fake-spot"}},
		},
		"team price cap rules out everything": {
			fleet: busy(), job: func() gangway.QueueEntry { return burstJob("j", 1) },
			opts: func(o *placement.Options) {
				o.Teams = map[string]placement.TeamPolicy{"ml": {MaxPricePerGPUHour: 0.5, BudgetLeft: placement.NoBudget}}
			},
			want: map[gangway.JobID][]string{},
		},
		"team budget too small for the job": {
			fleet: busy(), job: func() gangway.QueueEntry { return burstJob("j", 2) },
			opts: func(o *placement.Options) { o.Teams = map[string]placement.TeamPolicy{"ml": {BudgetLeft: 5}} },
			want: map[gangway.JobID][]string{},
		},
		"only allowed capacity types": {
			fleet: busy(), job: func() gangway.QueueEntry {
				j := burstJob("j", 1)
				j.Burst.CapacityTypes = []gangway.CapacityType{gangway.CapacityOnDemand}
				return j
			},
			want: map[gangway.JobID][]string{"j": {"fake-od"}},
		},
		"model the cloud does not have": {
			fleet: busy(), job: func() gangway.QueueEntry { j := burstJob("j", 1); j.GPUModels = []string{"H100"}; return j },
			want: map[gangway.JobID][]string{},
		},
		"tight deadline drops spot for on-demand": {
			fleet: busy(), job: func() gangway.QueueEntry {
				j := burstJob("j", 1)
				j.Checkpointable = false
				j.Deadline = t0.Add(2*time.Hour + 5*time.Minute)
				return j
			},
			opts: func(o *placement.Options) { o.BurstAfter = 24 * time.Hour },
			want: map[gangway.JobID][]string{"j": {"fake-od"}},
		},
		// Deadline jobs rent what the replay's deadline policy
		// (spotpolicy.BurstPolicy) would run them on.
		"deadline with slack, just submitted: spot, and no on-demand while waiting is safe": {
			fleet: busy(), job: func() gangway.QueueEntry { j := burstJob("j", 1); j.Deadline = t0.Add(10 * time.Hour); return j },
			want: map[gangway.JobID][]string{"j": {"fake-spot"}},
		},
		"deadline job behind its uniform-progress line: spot, on-demand as the fallback": {
			fleet: busy(), job: func() gangway.QueueEntry {
				j := burstJob("j", 1)
				j.SubmittedAt, j.Deadline = t0.Add(-3*time.Hour), t0.Add(3*time.Hour)
				return j
			},
			want: map[gangway.JobID][]string{"j": {"fake-spot", "fake-od"}},
		},
		"deadline job whose slack is under two changeovers: on-demand only": {
			fleet: busy(), job: func() gangway.QueueEntry {
				j := burstJob("j", 1)
				j.Deadline = t0.Add(2*time.Hour + 8*time.Minute)
				return j
			},
			opts: func(o *placement.Options) { o.RestartOverhead = 5 * time.Minute },
			want: map[gangway.JobID][]string{"j": {"fake-od"}},
		},
		"a pinned job never bursts again": {
			fleet: busy(), job: func() gangway.QueueEntry { j := burstJob("j", 1); j.Nodes = []string{"i-1"}; return j },
			want: map[gangway.JobID][]string{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := opts
			if tc.opts != nil {
				tc.opts(&o)
			}
			p := placement.Place(tc.fleet.build(), []gangway.QueueEntry{tc.job()}, o)
			if d := cmp.Diff(tc.want, burstsOf(p)); d != "" {
				t.Errorf("bursts (-want +got):\n%s\nplan: %+v", d, p)
			}
		})
	}
}

// TestBurstETA: the on-prem ETA counts running jobs' expected ends and the
// GPUs the blocked jobs ahead in the queue wait for, which they take first
// and give back when they end.
func TestBurstETA(t *testing.T) {
	soon := running("r1").on("n1", 0, 1, 2, 3, 4, 5, 6, 7).runtime(4 * time.Hour)
	soon.r.Runtime = 65 * time.Minute // started an hour ago: ends in 5 minutes
	late := running("r2").on("n2", 0, 1, 2, 3, 4, 5, 6, 7).runtime(4 * time.Hour)
	f := fleet(node("n1").gpus(8, "A100"), node("n2").gpus(8, "A100")).with(soon, late)
	o := placement.Options{Offers: []gangway.Offer{spotA100}, BurstAfter: 10 * time.Minute}
	ahead := job("ahead").gang(1, 8).prio(200).j
	b := burstJob("b", 1)

	if p := placement.Place(f.build(), []gangway.QueueEntry{b}, o); len(p.Bursts) != 0 {
		t.Errorf("b bursts although n1 frees in 5 minutes: %+v", p.Bursts)
	}
	p := placement.Place(f.build(), []gangway.QueueEntry{ahead, b}, o)
	if len(p.Bursts) != 1 || p.Bursts[0].JobID != "b" || p.Bursts[0].ETA != 3*time.Hour {
		t.Errorf("bursts %+v; want b with a 3 h ETA (n1 goes to the job ahead)", p.Bursts)
	}

	// Two jobs ahead, of an hour each: the first takes n1 in 5 minutes,
	// the second takes it from the first an hour later, and b has it an
	// hour after that (before n2 frees in 3 hours), not never.
	first, second := job("first").gang(1, 8).prio(200).j, job("second").gang(1, 8).prio(200).j
	first.Runtime, second.Runtime = time.Hour, time.Hour
	p = placement.Place(f.build(), []gangway.QueueEntry{first, second, b}, o)
	want := 5*time.Minute + 2*time.Hour
	if len(p.Bursts) != 1 || p.Bursts[0].ETA != want || !strings.HasPrefix(p.Bursts[0].Reason, "on-prem ETA 2h5m0s;") {
		t.Errorf("bursts %+v; want b with a %v ETA (n1 again after both jobs ahead)", p.Bursts, want)
	}
	// What the running jobs free is read again once a job is placed in
	// the same call: b takes n3's free half until 3 h from now, so c, behind
	// a, has n3 at 5 h (a takes the half r3 frees at 1 h and b's at 3 h,
	// for its 2 h), not at 3 h as before b started. x asks first.
	r3 := running("r3").on("n3", 0, 1, 2, 3).runtime(2 * time.Hour)
	half := fleet(node("n3").gpus(8, "A100")).with(r3)
	a, bb := job("a").gang(1, 8).prio(200).j, job("b").gang(1, 4).prio(150).j
	a.Runtime, bb.Runtime, bb.MaxRuntime = 2*time.Hour, 3*time.Hour, 3*time.Hour
	x, c := burstJob("x", 1), burstJob("c", 1)
	x.Priority = 180
	p = placement.Place(half.build(), []gangway.QueueEntry{a, x, bb, c}, o)
	if len(p.Assignments) != 1 || p.Assignments[0].JobID != "b" {
		t.Fatalf("assignments %+v; want b alone", p.Assignments)
	}
	etas := map[gangway.JobID]time.Duration{}
	for _, b := range p.Bursts {
		etas[b.JobID] = b.ETA
	}
	if etas["c"] != 5*time.Hour {
		t.Errorf("bursts %+v; want c with a 5 h ETA (b holds half of n3 for 3 h)", p.Bursts)
	}
	// A job larger than all the GPUs it may use never fits.
	big := burstJob("big", 3)
	if p := placement.Place(f.build(), []gangway.QueueEntry{big}, o); len(p.Bursts) != 1 || p.Bursts[0].ETA != -1 {
		t.Errorf("bursts %+v; want big to burst as never fitting on-prem", p.Bursts)
	}
}

// TestBurstAlikeJobs: jobs of one shape fail alike on-prem (the engine
// explains the first and reuses it), but each is its own burst decision,
// and each one left waiting counts among the jobs ahead of the next.
func TestBurstAlikeJobs(t *testing.T) {
	f := fleet(node("n1").gpus(8, "A100")).with(running("r1").on("n1", 0, 1, 2, 3, 4, 5, 6, 7).runtime(4 * time.Hour))
	o := placement.Options{Offers: []gangway.Offer{spotA100}, BurstAfter: 10 * time.Minute}
	stays := burstJob("stays", 1)
	stays.Burst.Enabled, stays.SubmittedAt = false, t0.Add(-time.Minute) // first in the queue
	p := placement.Place(f.build(), []gangway.QueueEntry{stays, burstJob("b", 1), burstJob("c", 1)}, o)
	// r1 ends in 3 h; stays takes n1 then, for its 2 h.
	got := map[gangway.JobID]time.Duration{}
	for _, b := range p.Bursts {
		got[b.JobID] = b.ETA
	}
	want := map[gangway.JobID]time.Duration{"b": 5 * time.Hour, "c": 5 * time.Hour}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bursts and their on-prem ETAs (-want +got):\n%s", diff)
	}
	if len(p.Unplaced) != 3 {
		t.Errorf("unplaced %+v; want all three", p.Unplaced)
	}
}

// TestBurstPredicted: given the runtimes the start-time estimator learned
// (Options.Predicted), the burst decision waits for a running job it
// expects to end soon, prices the job over the runtime it expects, and
// keeps to the declared runtimes for a job with a deadline.
func TestBurstPredicted(t *testing.T) {
	// n1 is held by r1, started an hour ago with a 24 h limit: by what it
	// declared, it ends in 23 h.
	f := fleet(node("n1").gpus(8, "A100")).with(running("r1").on("n1", 0, 1, 2, 3, 4, 5, 6, 7).runtime(24 * time.Hour))
	declared := func() gangway.QueueEntry {
		j := burstJob("j", 1)
		j.MaxRuntime, j.Runtime = 24*time.Hour, 24*time.Hour // no estimate given: the limit
		return j
	}
	priced := func(j gangway.QueueEntry, runtime time.Duration) float64 {
		return spotpolicy.ExpectedCost(spotA100, spotpolicy.Work{Replicas: 1, GPUsPerReplica: 8, Remaining: runtime,
			Checkpointable: j.Checkpointable, CheckpointInterval: j.CheckpointInterval})
	}
	budget := (priced(declared(), 2*time.Hour) + priced(declared(), 24*time.Hour)) / 2
	tests := map[string]struct {
		job       func() gangway.QueueEntry
		predicted map[gangway.JobID]time.Duration
		budget    float64
		// reserve turns reservations on: j holds n1 from r1's declared end.
		reserve bool
		// wantETA is the burst's on-prem ETA; wantPriced the runtime its
		// spot offer is priced over; none: no burst.
		wantETA, wantPriced time.Duration
		none                bool
	}{
		"declared runtimes: a 23 h wait, priced over the 24 h limit": {
			job: declared, wantETA: 23 * time.Hour, wantPriced: 24 * time.Hour,
		},
		"r1 expected to end in 30 minutes: the job waits for it": {
			job: declared, predicted: map[gangway.JobID]time.Duration{"r1": 90 * time.Minute, "j": 2 * time.Hour}, none: true,
		},
		"r1 expected to end in 30 minutes, after the job has waited 45: over the hour in all": {
			job:       func() gangway.QueueEntry { j := declared(); j.EnqueuedAt = t0.Add(-45 * time.Minute); return j },
			predicted: map[gangway.JobID]time.Duration{"r1": 90 * time.Minute, "j": 2 * time.Hour},
			wantETA:   30 * time.Minute, wantPriced: 2 * time.Hour,
		},
		"r1 expected to end in 30 minutes, after the job has waited 15: waits": {
			job:       func() gangway.QueueEntry { j := declared(); j.EnqueuedAt = t0.Add(-15 * time.Minute); return j },
			predicted: map[gangway.JobID]time.Duration{"r1": 90 * time.Minute, "j": 2 * time.Hour}, none: true,
		},
		"r1 expected to run 5 h more: bursts, priced over the 2 h expected": {
			job: declared, predicted: map[gangway.JobID]time.Duration{"r1": 6 * time.Hour, "j": 2 * time.Hour},
			wantETA: 5 * time.Hour, wantPriced: 2 * time.Hour,
		},
		"a reservation from the declared end, a predicted end sooner": {
			job: declared, predicted: map[gangway.JobID]time.Duration{"r1": 6 * time.Hour, "j": 2 * time.Hour}, reserve: true,
			wantETA: 5 * time.Hour, wantPriced: 2 * time.Hour,
		},
		"a budget 24 h would break but 2 h does not": {
			job: declared, predicted: map[gangway.JobID]time.Duration{"r1": 6 * time.Hour, "j": 2 * time.Hour}, budget: budget,
			wantETA: 5 * time.Hour, wantPriced: 2 * time.Hour,
		},
		"the same budget, nothing predicted for the job: priced over 24 h, no burst": {
			job: declared, predicted: map[gangway.JobID]time.Duration{"r1": 6 * time.Hour}, budget: budget, none: true,
		},
		"a job with a deadline keeps to the declared runtimes": {
			job:       func() gangway.QueueEntry { j := declared(); j.Deadline = t0.Add(30 * time.Hour); return j },
			predicted: map[gangway.JobID]time.Duration{"r1": 90 * time.Minute, "j": 2 * time.Hour},
			wantETA:   23 * time.Hour, wantPriced: 24 * time.Hour,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := placement.Options{Offers: []gangway.Offer{spotA100}, BurstAfter: time.Hour, Predicted: tc.predicted}
			if tc.reserve {
				o.Reservations = 1
			}
			if tc.budget > 0 {
				o.Teams = map[string]placement.TeamPolicy{"ml": {BudgetLeft: tc.budget}}
			}
			j := tc.job()
			p := placement.Place(f.build(), []gangway.QueueEntry{j}, o)
			if tc.none {
				if len(p.Bursts) != 0 {
					t.Errorf("bursts %+v, want none", p.Bursts)
				}
				return
			}
			if len(p.Bursts) != 1 {
				t.Fatalf("bursts %+v, want one; unplaced %+v", p.Bursts, p.Unplaced)
			}
			b := p.Bursts[0]
			if tc.reserve && len(p.Reservations) != 1 {
				t.Errorf("reservations %+v, want j's", p.Reservations)
			}
			if b.ETA != tc.wantETA {
				t.Errorf("on-prem ETA %v, want %v (reason %q)", b.ETA, tc.wantETA, b.Reason)
			}
			if got, want := b.Offers[0].ExpectedCost, priced(j, tc.wantPriced); math.Abs(got-want) > 1e-9 {
				t.Errorf("expected cost $%.2f, want $%.2f (over %v)", got, want, tc.wantPriced)
			}
		})
	}
}

// TestBurstReason: the burst explains itself in numbers.
func TestBurstReason(t *testing.T) {
	f := fleet(node("n1").gpus(8, "A100")).with(running("r1").on("n1", 0, 1, 2, 3, 4, 5, 6, 7).runtime(4 * time.Hour))
	p := placement.Place(f.build(), []gangway.QueueEntry{burstJob("j", 1)},
		placement.Options{Offers: []gangway.Offer{spotA100}, BurstAfter: time.Minute})
	if len(p.Bursts) != 1 {
		t.Fatalf("bursts %+v, want one", p.Bursts)
	}
	b := p.Bursts[0]
	if b.ETA != 3*time.Hour || b.Offers[0].Count != 1 || b.Offers[0].ExpectedCost <= 2*8 {
		t.Errorf("burst %+v: want ETA 3h, 1 instance, more than $16 expected (2 h × $8 plus interruptions)", b)
	}
	want := "on-prem ETA 3h0m0s; spot in fake-spot costs $"
	if len(b.Reason) < len(want) || b.Reason[:len(want)] != want {
		t.Errorf("reason %q, want it to start %q", b.Reason, want)
	}
}

// TestOwnedNodes: a node launched for one job takes only that job, and a
// pinned job goes only to its nodes.
func TestOwnedNodes(t *testing.T) {
	owned := node("i-1").gpus(8, "A100")
	owned.n.Owner = "burst-job"
	f := fleet(owned, node("n2").gpus(8, "A100"))
	other := job("other").gang(1, 8).j
	pinned := job("burst-job").gang(1, 8).j
	pinned.Nodes = []string{"i-1"}
	p := placement.Place(f.build(), []gangway.QueueEntry{other, pinned}, placement.Options{})
	got := map[gangway.JobID]string{}
	for _, a := range p.Assignments {
		got[a.JobID] = a.Members[0].NodeID
	}
	if d := cmp.Diff(map[gangway.JobID]string{"other": "n2", "burst-job": "i-1"}, got); d != "" {
		t.Errorf("placements (-want +got):\n%s", d)
	}
	// Without its own node free, the other job does not take i-1.
	p = placement.Place(fleet(owned).build(), []gangway.QueueEntry{other}, placement.Options{})
	if len(p.Assignments) != 0 {
		t.Errorf("a job was placed on another job's node: %+v", p.Assignments)
	}
}

// TestBurstBudgetCommitted: a team's budget pays for what the team has
// already committed and the ledger does not hold yet: its runs on cloud
// nodes, for the longer of their expected runtime and the time they have
// run, and the bursts the same plan has decided before.
func TestBurstBudgetCommitted(t *testing.T) {
	// One burst of burstJob's 2 h on spotA100.
	cost := spotpolicy.ExpectedCost(spotA100, spotpolicy.Work{Replicas: 1, GPUsPerReplica: 8, Remaining: 2 * time.Hour,
		Checkpointable: true, CheckpointInterval: 10 * time.Minute})
	// cloudRun is r2 on c1, a spot node at $1 a GPU-hour launched for it,
	// started an hour ago.
	cloudRun := func(team string, runtime time.Duration) (*nodeBuilder, *runBuilder) {
		c1 := node("c1").gpus(8, "A100")
		c1.n.CapacityType, c1.n.PricePerGPUHour, c1.n.Owner = gangway.CapacitySpot, 1, "r2"
		return c1, running("r2").team(team).on("c1", 0, 1, 2, 3, 4, 5, 6, 7).runtime(runtime)
	}
	tests := map[string]struct {
		cloud  bool
		pinned bool // p queued pinned to c1, launched for it
		team   string
		run    time.Duration
		since  time.Duration // the budget's period began this long ago (0: not set)
		budget float64
		want   []gangway.JobID
	}{
		"each fits the budget alone, two together": {budget: 2.5 * cost, want: []gangway.JobID{"a", "b"}},
		"a cloud run expected to cost $32 in all takes its share": {
			cloud: true, team: "ml", run: 4 * time.Hour, budget: 32 + 1.5*cost, want: []gangway.JobID{"a"},
		},
		"another team's cloud run does not": {
			cloud: true, team: "cv", run: 4 * time.Hour, budget: 32 + 1.5*cost, want: []gangway.JobID{"a", "b", "c"},
		},
		"a run past its expected end counts the hour it has run ($8), not its 30 minutes": {
			cloud: true, team: "ml", run: 30 * time.Minute, budget: 6 + 2*cost, want: []gangway.JobID{"a"},
		},
		"a run begun before the month counts from the month's start ($28 of its $32)": {
			cloud: true, team: "ml", run: 4 * time.Hour, since: 30 * time.Minute, budget: 28 + 1.2*cost, want: []gangway.JobID{"a"},
		},
		"a job queued on the cloud node launched for it counts its expected 2 h ($16), once": {
			pinned: true, budget: 16 + 1.5*cost, want: []gangway.JobID{"a"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := fleet(node("n1").gpus(8, "A100")).with(running("r1").on("n1", 0, 1, 2, 3, 4, 5, 6, 7).runtime(24 * time.Hour))
			if tc.cloud {
				c1, r2 := cloudRun(tc.team, tc.run)
				f = fleet(node("n1").gpus(8, "A100"), c1).with(running("r1").on("n1", 0, 1, 2, 3, 4, 5, 6, 7).runtime(24*time.Hour), r2)
			}
			queue := []gangway.QueueEntry{burstJob("a", 1), burstJob("b", 1), burstJob("c", 1)}
			if tc.pinned {
				c1 := node("c1").gpus(8, "A100")
				c1.n.CapacityType, c1.n.PricePerGPUHour, c1.n.Owner = gangway.CapacitySpot, 1, "p"
				f = fleet(node("n1").gpus(8, "A100"), c1).with(running("r1").on("n1", 0, 1, 2, 3, 4, 5, 6, 7).runtime(24 * time.Hour))
				p := job("p").gang(1, 8).prio(200).j
				p.Nodes, p.Runtime, p.MaxRuntime = []string{"c1"}, 2*time.Hour, 2*time.Hour
				queue = append(queue, p)
			}
			o := placement.Options{Offers: []gangway.Offer{spotA100}, BurstAfter: 10 * time.Minute,
				Teams: map[string]placement.TeamPolicy{"ml": {BudgetLeft: tc.budget}, "cv": {BudgetLeft: 0}}}
			if tc.since > 0 {
				ml := o.Teams["ml"]
				ml.Since = t0.Add(-tc.since)
				o.Teams["ml"] = ml
			}
			p := placement.Place(f.build(), queue, o)
			if tc.pinned && (len(p.Assignments) != 1 || p.Assignments[0].JobID != "p") {
				t.Fatalf("assignments %+v; want p on c1", p.Assignments)
			}
			var got []gangway.JobID
			for _, b := range p.Bursts {
				got = append(got, b.JobID)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("bursts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBurstRefusedSaysWhy: a job that has waited long enough to burst but
// may rent nothing says why in its reason's detail.
func TestBurstRefusedSaysWhy(t *testing.T) {
	f := fleet(node("n1").gpus(8, "A100")).with(running("r1").on("n1", 0, 1, 2, 3, 4, 5, 6, 7).runtime(4 * time.Hour))
	tests := map[string]struct {
		job  func(j *gangway.QueueEntry)
		opts func(o *placement.Options)
		want string // the detail's end; "": no refusal in it
	}{
		"bursts: nothing to say": {},
		"a wait short of the threshold: nothing to say": {
			opts: func(o *placement.Options) { o.BurstAfter = 4 * time.Hour },
		},
		"its team's budget is short": {
			opts: func(o *placement.Options) {
				o.Teams = map[string]placement.TeamPolicy{"ml": {BudgetLeft: 5, MaxPricePerGPUHour: 10}}
			},
			want: "; not bursting: team ml has $5.00 of its cloud budget left after $0.00 committed to runs and bursts not yet billed; the cheapest matching offer is expected to cost $16.27",
		},
		"over its price cap": {
			job:  func(j *gangway.QueueEntry) { j.Burst.MaxPricePerGPUHour = 0.5 },
			want: "; not bursting: every matching cloud offer is over its price cap (cheapest $1.00/GPU-h)",
		},
		"no offer in its pools": {
			job:  func(j *gangway.QueueEntry) { j.Burst.Pools = []string{"elsewhere"} },
			want: "; not bursting: no cloud offer has its GPU model, pool and capacity type with room for a replica",
		},
		"a deadline far off, on-demand alone offered: the deadline policy takes spot": {
			job:  func(j *gangway.QueueEntry) { j.Deadline = t0.Add(48 * time.Hour) },
			opts: func(o *placement.Options) { o.Offers = []gangway.Offer{odA100} },
			want: "; not bursting: its deadline policy takes spot alone for now, and no spot offer is within its limits",
		},
		"no offer finishes by its deadline": {
			job:  func(j *gangway.QueueEntry) { j.Deadline = t0.Add(time.Hour) },
			want: "; not bursting: no cloud offer is expected to finish by its deadline (the soonest in 2h0m0s)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			j := burstJob("j", 1)
			if tc.job != nil {
				tc.job(&j)
			}
			o := placement.Options{Offers: []gangway.Offer{spotA100, odA100}, BurstAfter: 10 * time.Minute}
			if tc.opts != nil {
				tc.opts(&o)
			}
			p := placement.Place(f.build(), []gangway.QueueEntry{j}, o)
			if len(p.Unplaced) != 1 {
				t.Fatalf("unplaced %+v; want j", p.Unplaced)
			}
			detail := p.Unplaced[0].Detail
			_, refused, _ := strings.Cut(detail, "; not bursting: ")
			switch {
			case tc.want == "" && refused != "":
				t.Errorf("detail %q says why it does not burst; want nothing", detail)
			case tc.want != "" && !strings.HasSuffix(detail, tc.want):
				t.Errorf("detail %q; want it to end %q", detail, tc.want)
			}
			if tc.want != "" && len(p.Bursts) != 0 {
				t.Errorf("bursts %+v; want none", p.Bursts)
			}
		})
	}
}

// TestBurstOnExpectedStarts: where the start-time estimator expects a job
// to start on-prem (Options.ExpectedStarts), the burst decision reads its
// wait from there rather than from the running jobs' ends; a job with a
// deadline keeps to the declared runtimes.
func TestBurstOnExpectedStarts(t *testing.T) {
	// n1 frees in 5 minutes by r1's declared runtime.
	soon := running("r1").on("n1", 0, 1, 2, 3, 4, 5, 6, 7).runtime(65 * time.Minute)
	f := fleet(node("n1").gpus(8, "A100")).with(soon)
	for _, tc := range []struct {
		name     string
		expected time.Duration // from now; 0: no estimate
		deadline bool
		wantETA  time.Duration // -2: no burst
	}{
		{"no estimate: n1 in 5 minutes, no burst", 0, false, -2},
		{"expected in 3 h: bursts on it", 3 * time.Hour, false, 3 * time.Hour},
		{"expected in 5 minutes: no burst", 5 * time.Minute, false, -2},
		{"a deadline: the declared runtimes, no burst", 3 * time.Hour, true, -2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := burstJob("j", 1)
			if tc.deadline {
				j.Deadline = t0.Add(48 * time.Hour)
			}
			o := placement.Options{Offers: []gangway.Offer{spotA100}, BurstAfter: 10 * time.Minute}
			if tc.expected > 0 {
				o.ExpectedStarts = map[gangway.JobID]time.Time{"j": t0.Add(tc.expected)}
			}
			p := placement.Place(f.build(), []gangway.QueueEntry{j}, o)
			switch {
			case tc.wantETA == -2 && len(p.Bursts) != 0:
				t.Errorf("bursts %+v; want none", p.Bursts)
			case tc.wantETA != -2 && (len(p.Bursts) != 1 || p.Bursts[0].ETA != tc.wantETA):
				t.Errorf("bursts %+v; want j with an on-prem ETA of %v", p.Bursts, tc.wantETA)
			}
		})
	}
}

// TestBurstBudgetAcrossCalls: in a session of several Place calls (the
// forecast's simulated cycles) a burst stays charged to its team's budget
// after the call that decided it: its instances are not in the snapshot.
func TestBurstBudgetAcrossCalls(t *testing.T) {
	cost := spotpolicy.ExpectedCost(spotA100, spotpolicy.Work{Replicas: 1, GPUsPerReplica: 8, Remaining: 2 * time.Hour,
		Checkpointable: true, CheckpointInterval: 10 * time.Minute})
	f := fleet(node("n1").gpus(8, "A100")).with(running("r1").on("n1", 0, 1, 2, 3, 4, 5, 6, 7).runtime(24 * time.Hour))
	se := placement.NewSession(f.build(), placement.Options{Offers: []gangway.Offer{spotA100}, BurstAfter: 10 * time.Minute,
		Teams: map[string]placement.TeamPolicy{"ml": {BudgetLeft: 1.5 * cost}}})
	if p := se.Place([]gangway.QueueEntry{burstJob("a", 1)}); len(p.Bursts) != 1 {
		t.Fatalf("first call: bursts %+v, want a", p.Bursts)
	}
	p := se.Place([]gangway.QueueEntry{burstJob("b", 1)})
	if len(p.Bursts) != 0 {
		t.Errorf("second call: bursts %+v; want none (a spent the budget)", p.Bursts)
	}
	if len(p.Unplaced) != 1 || !strings.Contains(p.Unplaced[0].Detail, "not bursting: team ml has") {
		t.Errorf("unplaced %+v; want b to say its team's budget is short", p.Unplaced)
	}
}
