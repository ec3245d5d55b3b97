package forecast

import (
	"container/heap"
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
	"github.com/gangwayhq/gangway/placement"
)

// Options tune forecasts and the Estimator. The zero value is the
// defaults.
type Options struct {
	// Every is how many cycles apart an Estimator forecasts (default 10);
	// a waiting job with no estimate yet makes one due at once.
	Every int
	// MaxSteps bounds the instants one simulation calls Place at (those
	// where, by placement.Session.MayStart, some job could start), so a
	// simulation costs at most about MaxSteps Place calls (default 64); a
	// job not started by the last one is Beyond it.
	MaxSteps int
	// Resolution: ends within Resolution × (how far ahead the first of
	// them is) are played as one instant, at the last of them (default
	// 0.1): starts far ahead, where only relative error counts, cost
	// fewer instants.
	Resolution float64
	// MinStep: ends closer together than this are one instant (default
	// 1s).
	MinStep time.Duration
	// BootTime is how long a job sent to rented capacity takes to start
	// there (default spotpolicy.DefaultRestartOverhead).
	BootTime time.Duration

	// NoCalibration leaves estimates as simulated (the baseline).
	NoCalibration bool
	// Window is how many scored first estimates a group of one priority
	// and one band of predicted wait keeps (default 256; a priority's
	// group 2 ×, everything 4 ×); MinScores is how many a group needs
	// before it calibrates (default 20; below that the next coarser group
	// does).
	Window, MinScores int
	// Slack is added to predicted and actual waits before they are
	// compared (default 1m), so that a wait predicted near zero does not
	// make the ratio blow up.
	Slack time.Duration
	// ColdSpread is, until there are scores to calibrate on, how many
	// times the median wait (plus Slack) the P90 is at least (default 2):
	// a forecast cannot know the work that will arrive and cut in.
	ColdSpread float64
}

func (o Options) withDefaults() Options {
	if o.Every <= 0 {
		o.Every = 10
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = 64
	}
	if o.Resolution <= 0 {
		o.Resolution = 0.1
	}
	if o.MinStep <= 0 {
		o.MinStep = time.Second
	}
	if o.BootTime <= 0 {
		o.BootTime = spotpolicy.DefaultRestartOverhead
	}
	if o.Window <= 0 {
		o.Window = 256
	}
	if o.MinScores <= 0 {
		o.MinScores = 20
	}
	if o.Slack <= 0 {
		o.Slack = time.Minute
	}
	if o.ColdSpread <= 0 {
		o.ColdSpread = 2
	}
	return o
}

// Input is what a forecast starts from: the dispatch loop's snapshot and
// queue of one cycle, before its plan, and its placement options. Jobs
// that will arrive later are not in it: the Estimator's calibration
// accounts for the delay they cause on average.
type Input struct {
	Snapshot placement.Snapshot
	Queue    []gangway.QueueEntry
	Options  placement.Options
}

// Start is one job's start in one simulation.
type Start struct {
	// At is the start; for a job not Started, the last instant played.
	At      time.Time
	Started bool
	// Burst: it starts on rented capacity (At is when the instance is up).
	Burst bool
	// WaitsFor are the jobs whose end freed the GPUs it starts on; for a
	// job that starts on GPUs free all along (it waited for quota or its
	// turn), its team's jobs that ended at that instant, else every job
	// that did. At most maxWaitsFor, in the order they ended.
	WaitsFor []gangway.JobID
}

const maxWaitsFor = 8

// maxRounds bounds the Place calls at one instant: after one preempts,
// the victims stop at once and the preemptor starts in the next.
const maxRounds = 4

// Run is one simulation's outcome.
type Run struct {
	Starts map[gangway.JobID]Start
	// Horizon is the last instant played; Steps how many were.
	Horizon time.Time
	Steps   int
	// Bursting are the jobs the plan at the first instant sends to rented
	// capacity, with the offer it rents first.
	Bursting map[gangway.JobID]gangway.BurstOffer
	// PlaceCalls counts the engine's Place calls.
	PlaceCalls int
}

type simulation struct {
	in   Input
	rt   Runtimes
	q    float64
	o    Options
	now  time.Time
	se   *placement.Session
	out  Run
	want map[gangway.JobID]bool

	events  endHeap
	seq     int
	running map[gangway.JobID]*simRun
	// override is the work left of a requeued victim.
	override map[gangway.JobID]time.Duration
	// entries are the queued jobs by ID, requeued victims included.
	entries map[gangway.JobID]*gangway.QueueEntry
	// freedBy is, per GPU, the last job that released it.
	freedBy map[gpuKey]gangway.JobID
	model   map[string]string
	// predicted is the session's placement.Options.Predicted: the runs
	// as this simulation plays them.
	predicted map[gangway.JobID]time.Duration
}

type simRun struct {
	a   gangway.Assignment
	end time.Time
}

type gpuKey struct {
	node string
	gpu  int
}

func newSimulation(in Input, rt Runtimes, q float64, o Options) *simulation {
	po := in.Options
	po.MaxAssignments = 0 // the loop's per-cycle cap only spreads starts over cycles
	// The simulated burst decisions expect the runs the simulation plays,
	// and the waits it plays, not the last forecast's.
	po.Predicted = Predicted(in.Snapshot, in.Queue, rt, q)
	po.ExpectedStarts = nil
	s := &simulation{in: in, rt: rt, q: q, o: o, now: in.Snapshot.Now, se: placement.NewSession(in.Snapshot, po),
		want: make(map[gangway.JobID]bool, len(in.Queue)), running: make(map[gangway.JobID]*simRun, len(in.Snapshot.Running)),
		override: map[gangway.JobID]time.Duration{}, entries: make(map[gangway.JobID]*gangway.QueueEntry, len(in.Queue)), freedBy: map[gpuKey]gangway.JobID{}, model: map[string]string{},
		out: Run{Starts: make(map[gangway.JobID]Start, len(in.Queue))}, predicted: po.Predicted}
	for i := range in.Snapshot.Nodes {
		n := &in.Snapshot.Nodes[i]
		s.model[n.ID] = n.Model
	}
	maxPrio := -1 << 31
	for i := range in.Queue {
		s.want[in.Queue[i].JobID] = true
		s.entries[in.Queue[i].JobID] = &in.Queue[i]
		maxPrio = max(maxPrio, in.Queue[i].Priority)
	}
	for i := range in.Snapshot.Running {
		a := in.Snapshot.Running[i]
		left := rt.Remaining(RunningJob(&a), max(s.now.Sub(a.At), 0), q)
		s.start(a, s.now.Add(left))
		// A preemptible job may become a victim only once it has run
		// MinRuntime: play that instant too, when someone could preempt it.
		if po.Preempt && po.MinRuntime > 0 && a.Preemptible && a.Priority < maxPrio {
			if at := a.At.Add(po.MinRuntime); at.After(s.now) {
				s.push(endEvent{at: at, id: a.JobID, wake: true})
			}
		}
	}
	return s
}

// Predicted is how long rt expects each run in s and queue to last, at
// its q-quantile (a running job's conditioned on how long it has run), as
// placement.Options.Predicted takes it: the burst decision then expects
// what the estimates do. Jobs rt cannot bound (Forever) are left out, to
// their declared runtimes.
func Predicted(s placement.Snapshot, queue []gangway.QueueEntry, rt Runtimes, q float64) map[gangway.JobID]time.Duration {
	out := make(map[gangway.JobID]time.Duration, len(s.Running)+len(queue))
	add := func(id gangway.JobID, elapsed, left time.Duration) {
		if left > 0 && left < Forever {
			out[id] = elapsed + left
		}
	}
	for i := range s.Running {
		a := &s.Running[i]
		elapsed := max(s.Now.Sub(a.At), 0)
		add(a.JobID, elapsed, rt.Remaining(RunningJob(a), elapsed, q))
	}
	for i := range queue {
		add(queue[i].JobID, 0, rt.Remaining(QueuedJob(&queue[i]), 0, q))
	}
	return out
}

// predict records in the session's placement.Options.Predicted a run the
// simulation starts or requeues with left to go.
func (s *simulation) predict(id gangway.JobID, left time.Duration) {
	if left > 0 && left < Forever {
		s.predicted[id] = left
	}
}

// cloud is, per queued job that could rent, its cheapest option now
// (placement.Session.CloudOptions), priced over the runtime the model
// gives it (placement.Options.Predicted) rather than the declared one: a
// team that asks for 24 h and runs 2 is shown what 2 h cost. Call it
// before run, which moves the session's clock.
func (s *simulation) cloud() map[gangway.JobID]gangway.BurstOffer {
	if len(s.in.Options.Offers) == 0 {
		return nil
	}
	out := map[gangway.JobID]gangway.BurstOffer{}
	for i := range s.in.Queue {
		if c := s.se.CloudOptions(&s.in.Queue[i]); len(c) > 0 {
			out[s.in.Queue[i].JobID] = c[0]
		}
	}
	return out
}

func (s *simulation) run() Run {
	queue := slices.Clone(s.in.Queue)
	t := s.now
	var released []gangway.Assignment
	mustPlace := true // the first instant, and any a job may become a victim at
	for steps := 0; ; {
		s.se.SetNow(t)
		if mustPlace || s.se.MayStart(queue) {
			queue = s.place(t, queue, released, steps == 0)
			released = released[:0]
			steps++
			s.out.Steps++
		}
		if len(queue) == 0 || steps >= s.o.MaxSteps {
			break
		}
		next, rel, wake, ok := s.advance(t)
		if !ok {
			break
		}
		t, mustPlace = next, wake
		released = append(released, rel...)
	}
	s.out.Horizon = t
	for _, e := range s.in.Queue {
		if _, ok := s.out.Starts[e.JobID]; !ok {
			s.out.Starts[e.JobID] = Start{At: t}
		}
	}
	return s.out
}

// place runs the engine at t until it preempts no more, and returns what
// is still queued.
func (s *simulation) place(t time.Time, queue []gangway.QueueEntry, released []gangway.Assignment, first bool) []gangway.QueueEntry {
	for range maxRounds {
		plan := s.se.Place(queue)
		s.out.PlaceCalls++
		gone := make(map[gangway.JobID]bool, len(plan.Assignments)+len(plan.Bursts))
		for _, a := range plan.Assignments {
			gone[a.JobID] = true
			s.record(a.JobID, Start{At: t, Started: true, WaitsFor: s.blockers(a, t, released)})
			left, ok := s.override[a.JobID]
			if !ok {
				e, ok := s.entries[a.JobID]
				if !ok {
					e = &gangway.QueueEntry{JobID: a.JobID}
				}
				left = s.rt.Remaining(QueuedJob(e), 0, s.q)
			}
			s.predict(a.JobID, left)
			s.start(a, t.Add(left))
		}
		for _, b := range plan.Bursts {
			gone[b.JobID] = true
			s.record(b.JobID, Start{At: t.Add(s.o.BootTime), Started: true, Burst: true})
			if first && len(b.Offers) > 0 {
				if s.out.Bursting == nil {
					s.out.Bursting = map[gangway.JobID]gangway.BurstOffer{}
				}
				s.out.Bursting[b.JobID] = b.Offers[0]
			}
		}
		for _, u := range plan.Unplaced {
			if !u.Reason.Retry() {
				gone[u.JobID] = true // never fits: no start to find
			}
		}
		queue = slices.DeleteFunc(queue, func(e gangway.QueueEntry) bool { return gone[e.JobID] })
		if len(plan.Preemptions) == 0 {
			return queue
		}
		for _, p := range plan.Preemptions {
			for _, v := range p.Victims {
				r, ok := s.running[v.JobID]
				if !ok {
					continue
				}
				s.stop(r)
				released = append(released, r.a)
				s.override[v.JobID] = max(r.end.Sub(t), 0)
				s.predict(v.JobID, s.override[v.JobID])
				e := s.requeued(r.a, t)
				queue = append(queue, e)
				s.entries[e.JobID] = &e
			}
		}
	}
	return queue
}

// record keeps a wanted job's first start.
func (s *simulation) record(id gangway.JobID, st Start) {
	if _, done := s.out.Starts[id]; s.want[id] && !done {
		s.out.Starts[id] = st
	}
}

// start adds a run that ends at end.
func (s *simulation) start(a gangway.Assignment, end time.Time) {
	if end.Sub(s.now) > Forever {
		end = s.now.Add(Forever)
	}
	s.running[a.JobID] = &simRun{a: a, end: end}
	s.push(endEvent{at: end, id: a.JobID})
}

// stop ends a run now: its capacity goes back to the session, and its
// GPUs remember who freed them.
func (s *simulation) stop(r *simRun) {
	s.se.Release(r.a.JobID)
	delete(s.running, r.a.JobID)
	for _, m := range r.a.Members {
		for _, g := range m.GPUs {
			s.freedBy[gpuKey{m.NodeID, g}] = r.a.JobID
		}
	}
}

// advance plays the next instant: the next end and every end within the
// resolution after it. It returns the instant, the runs that ended, and
// whether a running job became preemptible then.
func (s *simulation) advance(t time.Time) (time.Time, []gangway.Assignment, bool, bool) {
	for len(s.events) > 0 && !s.valid(s.events[0]) {
		heap.Pop(&s.events)
	}
	if len(s.events) == 0 {
		return t, nil, false, false
	}
	first := s.events[0].at
	limit := first.Add(max(s.o.MinStep, time.Duration(s.o.Resolution*float64(first.Sub(s.now)))))
	last := first
	wake := false
	var ended []gangway.Assignment
	for len(s.events) > 0 && !s.events[0].at.After(limit) {
		e := heap.Pop(&s.events).(endEvent)
		if !s.valid(e) {
			continue
		}
		if e.at.After(last) {
			last = e.at
		}
		if e.wake {
			wake = true
			continue
		}
		r := s.running[e.id]
		s.stop(r)
		ended = append(ended, r.a)
	}
	if last.Before(t) {
		last = t
	}
	return last, ended, wake, true
}

func (s *simulation) valid(e endEvent) bool {
	r, ok := s.running[e.id]
	return ok && (e.wake || r.end.Equal(e.at))
}

// blockers are the jobs a starts after (Start.WaitsFor).
func (s *simulation) blockers(a gangway.Assignment, t time.Time, released []gangway.Assignment) []gangway.JobID {
	if !t.After(s.now) {
		return nil
	}
	var out []gangway.JobID
	add := func(id gangway.JobID) {
		if len(out) < maxWaitsFor && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	for _, m := range a.Members {
		for _, g := range m.GPUs {
			if id, ok := s.freedBy[gpuKey{m.NodeID, g}]; ok {
				add(id)
			}
		}
	}
	if len(out) == 0 {
		for _, r := range released {
			if r.Team == a.Team {
				add(r.JobID)
			}
		}
	}
	if len(out) == 0 {
		for _, r := range released {
			add(r.JobID)
		}
	}
	return out
}

// requeued is a victim back in the queue, as the engine would see it:
// its shape from the allocation, pinned to the model it ran on, keeping
// its place in line.
func (s *simulation) requeued(a gangway.Assignment, t time.Time) gangway.QueueEntry {
	e := gangway.QueueEntry{JobID: a.JobID, Team: a.Team, Project: a.Project, Priority: a.Priority, Attempt: a.Attempt + 1,
		Replicas: len(a.Members), CPUMilli: a.CPUMilli, MemMiB: a.MemMiB, MaxRuntime: a.MaxRuntime, Runtime: a.Runtime,
		Preemptible: a.Preemptible, SubmittedAt: a.At, EnqueuedAt: t}
	if len(a.Members) > 0 {
		m := a.Members[0]
		e.GPUsPerReplica = len(m.GPUs)
		if m.Share() {
			e.GPUMilli = m.Milli
		}
		e.MIGProfile = m.MIG
		if model := s.model[m.NodeID]; model != "" {
			e.GPUModels = []string{model}
		}
	}
	return e
}

func (s *simulation) push(e endEvent) {
	e.seq = s.seq
	s.seq++
	heap.Push(&s.events, e)
}

// endEvent is a run's predicted end, or (wake) the instant a running job
// may first be preempted.
type endEvent struct {
	at   time.Time
	seq  int
	id   gangway.JobID
	wake bool
}

type endHeap []endEvent

func (h endHeap) Len() int { return len(h) }
func (h endHeap) Less(a, b int) bool {
	if !h[a].at.Equal(h[b].at) {
		return h[a].at.Before(h[b].at)
	}
	return h[a].seq < h[b].seq
}
func (h endHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *endHeap) Push(x any)   { *h = append(*h, x.(endEvent)) }
func (h *endHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
