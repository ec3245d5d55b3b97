package placement_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// defragOn is the budget the defragmentation cases run with unless they
// say otherwise: plenty of moves and GPU-seconds, 30 s per restart.
func defragOn() placement.Defrag {
	return placement.Defrag{Enabled: true, MaxMovesPerHour: 10, MaxLostGPUSecondsPerHour: 10000,
		RestartOverhead: 30 * time.Second}
}

// movable is a running job defragmentation may move: priority 0,
// preemptible, checkpointing, its newest checkpoint a minute old.
func movable(id string) *runBuilder {
	return running(id).prio(0).preemptible().checkpointable().checkpoint(t0.Add(-time.Minute))
}

type defragCase struct {
	fleet    *fleetBuilder
	queue    []gangway.QueueEntry
	defrag   func(d *placement.Defrag) // changes to defragOn
	preempt  bool
	want     []placement.DefragPlan
	reason   placement.Reason // of the first job in the queue
	detail   string           // "": not compared
	wantPlan []gangway.Assignment
}

// movingA is a defragmentation planned 10 s ago, under way: big's
// destination is all of n1, once a (at attempt) moves to n2's GPUs 4-7.
func movingA(attempt int) func(d *placement.Defrag) {
	return func(d *placement.Defrag) {
		d.InFlight = []placement.DefragPlan{{Job: "big", At: t0.Add(-10 * time.Second),
			Dest: []gangway.Member{on(0, "n1", seq(0, 8)...)},
			Moves: []placement.Move{{JobID: "a", Attempt: attempt, GPUs: 4, From: "n1",
				To: []gangway.Member{on(0, "n2", 4, 5, 6, 7)}, LostGPUSeconds: 360}}, LostGPUSeconds: 360}}
	}
}

func TestDefragPlans(t *testing.T) {
	big := func() *jobBuilder { return job("big").gang(1, 8) }
	cases := map[string]defragCase{
		"one move frees a node": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).
				with(movable("a").on("n1", 0, 1, 2, 3), running("b").on("n2", 0, 1, 2, 3)),
			queue: queue(big()),
			want: []placement.DefragPlan{{Job: "big", At: t0, Dest: []gangway.Member{on(0, "n1", seq(0, 8)...)},
				Moves: []placement.Move{{JobID: "a", GPUs: 4, From: "n1", To: []gangway.Member{on(0, "n2", 4, 5, 6, 7)},
					LostGPUSeconds: 360}}, LostGPUSeconds: 360}},
			reason: placement.ReasonDefragmenting,
			detail: "1 × 8 GPUs: waiting for defragmentation: moving 1 job (a), about 360 GPU-seconds lost; GPUs on n1 reserved for it",
		},
		"two moves when no one move does": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100"), node("n3").gpus(8, "H100")).
				with(movable("a").on("n1", 0, 1, 2, 3), movable("c").on("n1", 4, 5), movable("d").on("n2", 0, 1, 2, 3),
					running("x").on("n3", seq(0, 6)...)),
			queue: queue(big()),
			want: []placement.DefragPlan{{Job: "big", At: t0, Dest: []gangway.Member{on(0, "n2", seq(0, 8)...)},
				Moves: []placement.Move{
					{JobID: "d", GPUs: 4, From: "n2", To: []gangway.Member{on(0, "n1", 4, 5, 6, 7)}, LostGPUSeconds: 360},
					{JobID: "c", GPUs: 2, From: "n1", To: []gangway.Member{on(0, "n3", 6, 7)}, LostGPUSeconds: 180},
				}, LostGPUSeconds: 540}},
			reason: placement.ReasonDefragmenting,
			detail: "1 × 8 GPUs: waiting for defragmentation: moving 2 jobs (d, c), about 540 GPU-seconds lost; GPUs on n2 reserved for it",
		},
		"the fewest moves, even when more would cost less": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100"), node("n3").gpus(8, "H100")).
				with(movable("a").on("n1", 0, 1, 2, 3).checkpoint(t0.Add(-9*time.Minute)),
					movable("c").on("n2", 0, 1), movable("e").on("n2", 2, 3), running("x").on("n3", 0, 1, 2, 3)),
			queue: queue(big()),
			want: []placement.DefragPlan{{Job: "big", At: t0, Dest: []gangway.Member{on(0, "n1", seq(0, 8)...)},
				Moves: []placement.Move{{JobID: "a", GPUs: 4, From: "n1", To: []gangway.Member{on(0, "n2", 4, 5, 6, 7)},
					LostGPUSeconds: 2280}}, LostGPUSeconds: 2280}},
			reason: placement.ReasonDefragmenting,
		},
		"the cheapest of the fewest": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).
				with(movable("a").on("n1", 0, 1, 2, 3).checkpoint(t0.Add(-5*time.Minute)), movable("b").on("n2", 0, 1, 2, 3)),
			queue: queue(big()),
			want: []placement.DefragPlan{{Job: "big", At: t0, Dest: []gangway.Member{on(0, "n2", seq(0, 8)...)},
				Moves: []placement.Move{{JobID: "b", GPUs: 4, From: "n2", To: []gangway.Member{on(0, "n1", 4, 5, 6, 7)},
					LostGPUSeconds: 360}}, LostGPUSeconds: 360}},
			reason: placement.ReasonDefragmenting,
		},
		"a job that does not checkpoint stays": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).
				with(running("a").prio(0).preemptible().on("n1", 0, 1, 2, 3), running("b").on("n2", 0, 1, 2, 3)),
			queue:  queue(big()),
			reason: placement.ReasonFragmented,
		},
		"a job that cannot be preempted stays": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).
				with(running("a").prio(0).checkpointable().checkpoint(t0.Add(-time.Minute)).on("n1", 0, 1, 2, 3),
					running("b").on("n2", 0, 1, 2, 3)),
			queue:  queue(big()),
			reason: placement.ReasonFragmented,
		},
		"a job whose newest checkpoint is old stays": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).
				with(movable("a").on("n1", 0, 1, 2, 3).checkpoint(t0.Add(-20*time.Minute)), running("b").on("n2", 0, 1, 2, 3)),
			queue:  queue(big()),
			reason: placement.ReasonFragmented,
		},
		"a job of higher priority stays": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).
				with(movable("a").prio(200).on("n1", 0, 1, 2, 3), running("b").on("n2", 0, 1, 2, 3)),
			queue:  queue(big()),
			reason: placement.ReasonFragmented,
		},
		"a job that would not fit elsewhere stays": {
			// a runs on H100 and the only room left is on A100.
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "A100")).
				with(movable("a").on("n1", 0, 1, 2, 3), running("b").on("n2", 0, 1, 2, 3)),
			queue:  queue(big()),
			reason: placement.ReasonFragmented,
		},
		"no moves left this hour": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).
				with(movable("a").on("n1", 0, 1, 2, 3), running("b").on("n2", 0, 1, 2, 3)),
			queue:  queue(big()),
			defrag: func(d *placement.Defrag) { d.Spent = placement.DefragSpent{Moves: 10} },
			reason: placement.ReasonFragmented,
		},
		"the move would lose more GPU-seconds than are left": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).
				with(movable("a").on("n1", 0, 1, 2, 3), running("b").on("n2", 0, 1, 2, 3)),
			queue:  queue(big()),
			defrag: func(d *placement.Defrag) { d.Spent = placement.DefragSpent{Moves: 1, LostGPUSeconds: 9700} },
			reason: placement.ReasonFragmented,
		},
		"outside the windows": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).
				with(movable("a").on("n1", 0, 1, 2, 3), running("b").on("n2", 0, 1, 2, 3)),
			queue:  queue(big()),
			defrag: func(d *placement.Defrag) { d.Windows = []placement.Window{{From: 22 * time.Hour, To: 6 * time.Hour}} },
			reason: placement.ReasonFragmented,
		},
		"inside a window (t0 is noon UTC, 14:00 two hours east)": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).
				with(movable("a").on("n1", 0, 1, 2, 3), running("b").on("n2", 0, 1, 2, 3)),
			queue: queue(big()),
			defrag: func(d *placement.Defrag) {
				d.Windows = []placement.Window{{From: 22 * time.Hour, To: 6 * time.Hour}, {From: 13 * time.Hour, To: 15 * time.Hour}}
				d.Location = time.FixedZone("UTC+2", 2*3600)
			},
			want: []placement.DefragPlan{{Job: "big", At: t0, Dest: []gangway.Member{on(0, "n1", seq(0, 8)...)},
				Moves: []placement.Move{{JobID: "a", GPUs: 4, From: "n1", To: []gangway.Member{on(0, "n2", 4, 5, 6, 7)},
					LostGPUSeconds: 360}}, LostGPUSeconds: 360}},
			reason: placement.ReasonDefragmenting,
		},
		"a move before a preemption": {
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).
				with(movable("a").on("n1", 0, 1, 2, 3), running("b").on("n2", 0, 1, 2, 3)),
			queue:   queue(big().prio(200)),
			preempt: true,
			want: []placement.DefragPlan{{Job: "big", At: t0, Dest: []gangway.Member{on(0, "n1", seq(0, 8)...)},
				Moves: []placement.Move{{JobID: "a", GPUs: 4, From: "n1", To: []gangway.Member{on(0, "n2", 4, 5, 6, 7)},
					LostGPUSeconds: 360}}, LostGPUSeconds: 360}},
			reason: placement.ReasonDefragmenting,
		},
		"under way: the destination and the landing spot are kept": {
			// big2, ahead in line, may take neither n1 (big's) nor n2's
			// free GPUs (a's landing spot).
			fleet: fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).
				with(movable("a").on("n1", 0, 1, 2, 3), running("b").on("n2", 0, 1, 2, 3)),
			queue:  queue(big(), job("big2").gang(1, 4).age(time.Hour)),
			defrag: movingA(0),
			reason: placement.ReasonDefragmenting,
			detail: "1 × 8 GPUs: waiting for defragmentation: moving 1 job (a), about 360 GPU-seconds lost; GPUs on n1 reserved for it",
		},
		"clearing: a moved job's allocation is gone, its node still reports it": {
			// a's attempt 1 was released and it is queued again, but
			// n1's GPUs 0-3 still show its task until the agent's next
			// heartbeat: big keeps waiting for defragmentation (not
			// explained afresh, which would drop the reservations) and a
			// may not take n1's free GPUs, reserved for big.
			fleet: fleet(node("n1").gpus(8, "H100").used(0, 1, 2, 3), node("n2").gpus(8, "H100")).
				with(running("b").on("n2", 0, 1, 2, 3)),
			queue:  queue(big(), job("a").gang(1, 4).preemptible().checkpointable().attempt(2).age(time.Hour)),
			defrag: movingA(1),
			wantPlan: []gangway.Assignment{
				{JobID: "a", Attempt: 2, Members: []gangway.Member{on(0, "n2", 4, 5, 6, 7)}, At: t0},
			},
			reason: placement.ReasonDefragmenting,
		},
		"done: the job starts on its destination and the moved job on its landing spot": {
			// a stopped and is queued again, ahead of big; without the
			// reservations it would land on n1 and big would wait again.
			fleet:  fleet(node("n1").gpus(8, "H100"), node("n2").gpus(8, "H100")).with(running("b").on("n2", 0, 1, 2, 3)),
			queue:  queue(big(), job("a").gang(1, 4).preemptible().checkpointable().attempt(2).age(time.Hour)),
			defrag: movingA(1),
			wantPlan: []gangway.Assignment{
				{JobID: "a", Attempt: 2, Members: []gangway.Member{on(0, "n2", 4, 5, 6, 7)}, At: t0},
				{JobID: "big", Attempt: 1, Members: []gangway.Member{on(0, "n1", seq(0, 8)...)}, At: t0},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := defragOn()
			if tc.defrag != nil {
				tc.defrag(&d)
			}
			opts := placement.Options{Defrag: d, Preempt: tc.preempt}
			snap := tc.fleet.build()
			plan := placement.Place(snap, tc.queue, opts)
			checkPlan(t, snap, tc.queue, opts, plan)
			if d := cmp.Diff(tc.want, plan.Defrags, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("defrags (-want +got):\n%s", d)
			}
			if len(plan.Preemptions) > 0 {
				t.Errorf("preemptions %+v, want none", plan.Preemptions)
			}
			want := make([]gangway.Assignment, len(tc.wantPlan))
			for i, a := range tc.wantPlan {
				for k := range tc.queue {
					if tc.queue[k].JobID == a.JobID {
						want[i] = withEntry(a, &tc.queue[k])
					}
				}
			}
			if d := cmp.Diff(want, plan.Assignments, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("assignments (-want +got):\n%s", d)
			}
			if tc.reason == "" {
				return
			}
			var u *placement.Unplaced
			for k := range plan.Unplaced {
				if plan.Unplaced[k].JobID == tc.queue[0].JobID {
					u = &plan.Unplaced[k]
				}
			}
			switch {
			case u == nil:
				t.Fatalf("%s is not waiting; plan %+v", tc.queue[0].JobID, plan)
			case u.Reason != tc.reason:
				t.Errorf("%s waits for %s (%s), want %s", u.JobID, u.Reason, u.Detail, tc.reason)
			case tc.detail != "" && u.Detail != tc.detail:
				t.Errorf("%s's detail\n  %q, want\n  %q", u.JobID, u.Detail, tc.detail)
			}
		})
	}
}

func TestWindowContains(t *testing.T) {
	day := func(h, m int) time.Time { return time.Date(2025, 6, 1, h, m, 0, 0, time.UTC) }
	cases := map[string]struct {
		w    placement.Window
		at   time.Time
		want bool
	}{
		"inside":               {placement.Window{From: 9 * time.Hour, To: 17 * time.Hour}, day(12, 0), true},
		"at the start":         {placement.Window{From: 9 * time.Hour, To: 17 * time.Hour}, day(9, 0), true},
		"at the end":           {placement.Window{From: 9 * time.Hour, To: 17 * time.Hour}, day(17, 0), false},
		"past midnight, late":  {placement.Window{From: 22 * time.Hour, To: 6 * time.Hour}, day(23, 30), true},
		"past midnight, early": {placement.Window{From: 22 * time.Hour, To: 6 * time.Hour}, day(5, 59), true},
		"past midnight, noon":  {placement.Window{From: 22 * time.Hour, To: 6 * time.Hour}, day(12, 0), false},
		"all day":              {placement.Window{From: 0, To: 0}, day(12, 0), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.w.Contains(tc.at); got != tc.want {
				t.Errorf("%s contains %s = %v, want %v", tc.w, tc.at.Format("15:04"), got, tc.want)
			}
		})
	}
}
