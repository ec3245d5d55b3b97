package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
)

// Defrag tunes planned defragmentation (Options.Defrag). When a job waits
// only because the free GPUs it may use are scattered — enough free in
// total, no node with enough together (ReasonFragmented) — the engine
// looks for the fewest running jobs to move elsewhere so that it fits:
// preemptible jobs that checkpoint, of no higher priority than the job,
// whose newest checkpoint is recent. A move goes through the preemption
// path (the job saves a checkpoint, stops and resumes from it, spending
// no retry), so it costs the work since that checkpoint plus a restart.
//
// A move is planned only if the moved job fits elsewhere at once, on the
// fleet as it will be with the waiting job placed: defragmentation never
// turns a running job into a waiting one. The GPUs the waiting job will
// take and those each moved job will land on are reserved for them from
// the plan on (DefragPlan, passed back in InFlight every cycle) until they
// start there, so that nothing else, the moved jobs themselves included,
// takes them while the moved jobs checkpoint and stop. A moved job is
// requeued like any preempted job, keeping its place in line; its
// reserved landing spot is the one it was checked to fit on.
type Defrag struct {
	Enabled bool
	// MaxMovesPerHour and MaxLostGPUSecondsPerHour bound what the moves
	// planned in any hour may cost together, Spent included; a plan that
	// would pass either is not made. 0 allows none.
	MaxMovesPerHour          int
	MaxLostGPUSecondsPerHour float64
	// Windows are the daily windows, in Location (nil: UTC), in which
	// new moves may be planned; none means at any time, under the budget.
	// Moves already planned run to the end outside them.
	Windows  []Window
	Location *time.Location
	// MaxCheckpointAge: a job whose newest checkpoint (its start, before
	// the first one) is older than this is not moved: it would lose too
	// much. 0 means DefaultMaxCheckpointAge.
	MaxCheckpointAge time.Duration
	// RestartOverhead is what restarting a moved job costs it (restore,
	// start-up), per GPU it holds; it is part of a move's cost.
	RestartOverhead time.Duration
	// Spent is what the moves planned in the last hour cost (the caller
	// keeps the record); InFlight are the defragmentations planned
	// earlier whose jobs have not started yet (Plan.Defrags of earlier
	// calls, passed back until their job is placed or stops waiting for
	// them).
	Spent    DefragSpent
	InFlight []DefragPlan
}

// DefaultMaxCheckpointAge is Defrag.MaxCheckpointAge's default.
const DefaultMaxCheckpointAge = 10 * time.Minute

// Window is a daily stretch of time: from From to To after midnight; a To
// at or before From wraps past midnight ("22:00-06:00").
type Window struct {
	From, To time.Duration
}

// Contains reports whether t's time of day (in t's location) is in w.
func (w Window) Contains(t time.Time) bool {
	h, m, s := t.Clock()
	at := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second +
		time.Duration(t.Nanosecond())
	if w.From < w.To {
		return at >= w.From && at < w.To
	}
	return at >= w.From || at < w.To
}

func (w Window) String() string {
	f := func(d time.Duration) string { return fmt.Sprintf("%02d:%02d", int(d.Hours()), int(d.Minutes())%60) }
	return f(w.From) + "-" + f(w.To)
}

// Open reports whether new moves may be planned at now.
func (d *Defrag) Open(now time.Time) bool {
	if len(d.Windows) == 0 {
		return true
	}
	loc := d.Location
	if loc == nil {
		loc = time.UTC
	}
	t := now.In(loc)
	return slices.ContainsFunc(d.Windows, func(w Window) bool { return w.Contains(t) })
}

// DefragSpent is what moves cost: how many, and the GPU-seconds lost.
type DefragSpent struct {
	Moves          int
	LostGPUSeconds float64
}

// DefragPlan is one defragmentation: the running jobs to move so that Job
// fits, where Job will run (Dest, reserved for it) and what it costs.
//
// The JSON names are those the dispatch leader stores it under
// (capacity.View.SaveDefrags).
type DefragPlan struct {
	Job gangway.JobID `json:"job"`
	// At is when it was planned.
	At time.Time `json:"at"`
	// Dest is where Job fits once the moves are done: its members' nodes
	// and GPUs.
	Dest  []gangway.Member `json:"dest"`
	Moves []Move           `json:"moves"`
	// LostGPUSeconds is the moves' cost together.
	LostGPUSeconds float64 `json:"lostGPUSeconds"`
}

// Move is one running job moved to make room: stopped after a checkpoint
// and restarted on To (where it fits now, reserved for it).
type Move struct {
	JobID   gangway.JobID `json:"jobId"`
	Attempt int           `json:"attempt"`
	// GPUs it holds (shares count as a fraction) on From.
	GPUs float64          `json:"gpus"`
	From string           `json:"from"`
	To   []gangway.Member `json:"to"`
	// LostGPUSeconds is its GPU time since its newest checkpoint plus
	// the restart overhead.
	LostGPUSeconds float64 `json:"lostGPUSeconds"`
}

// Movers lists the jobs the plan moves.
func (p *DefragPlan) Movers() []gangway.JobID {
	ids := make([]gangway.JobID, len(p.Moves))
	for i, m := range p.Moves {
		ids[i] = m.JobID
	}
	return ids
}

// Nodes lists the nodes the plan's job will run on.
func (p *DefragPlan) Nodes() []string {
	var nodes []string
	for _, m := range p.Dest {
		nodes = append(nodes, m.NodeID)
	}
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

// Bounds of the search, per Place call and per waiting job: each trial
// simulates placing the job and every moved job, and the next cycle can
// go on where this one stopped.
const (
	// maxDefragSearches is how many fragmented jobs look for moves per
	// Place call.
	maxDefragSearches = 4
	// maxDefragMoves is the most jobs one plan moves.
	maxDefragMoves = 4
	// maxDefragCandidates is how many movable jobs a search considers:
	// those on the nodes closest to holding a replica, cheapest first.
	maxDefragCandidates = 12
	// maxDefragTrials bounds the sets of moves simulated per search.
	maxDefragTrials = 64
)

// resumeDefrags takes up the defragmentations planned in earlier calls
// whose job still waits: the GPUs of its destination are reserved for it,
// each moved job's landing spot for that job until it runs again (it may
// be stopping, between its release and its requeue, or queued), and the
// moved jobs still running are not offered to preemption or other
// defragmentations.
func (se *Session) resumeDefrags(queue []gangway.QueueEntry) {
	se.defrags, se.holders, se.defragSpent = nil, nil, DefragSpent{}
	if !se.opts.Defrag.Enabled || len(se.opts.Defrag.InFlight) == 0 {
		return
	}
	queued := make(map[gangway.JobID]bool, len(queue))
	for i := range queue {
		queued[queue[i].JobID] = true
	}
	for k := range se.opts.Defrag.InFlight {
		p := &se.opts.Defrag.InFlight[k]
		if !queued[p.Job] {
			continue // placed, or gone
		}
		se.noteDefrag(p)
		se.reserveFor(p.Job, p.Dest)
		for _, m := range p.Moves {
			if se.runningAt(m.JobID, m.Attempt) {
				se.victims[m.JobID] = true
			}
			if !se.restarted(m.JobID, m.Attempt) {
				se.reserveFor(m.JobID, m.To)
			}
		}
	}
}

// restarted reports whether job runs at an attempt after attempt.
func (se *Session) restarted(job gangway.JobID, attempt int) bool {
	return slices.ContainsFunc(se.running[:se.placedFrom], func(a gangway.Assignment) bool {
		return a.JobID == job && a.Attempt > attempt
	})
}

func (se *Session) noteDefrag(p *DefragPlan) {
	if se.defrags == nil {
		se.defrags, se.holders = map[gangway.JobID]*DefragPlan{}, map[gangway.JobID]bool{}
	}
	se.defrags[p.Job] = p
	se.holders[p.Job] = true
	for _, m := range p.Moves {
		se.holders[m.JobID] = true
	}
}

// reserveFor reserves the members' GPUs for job from now on.
func (se *Session) reserveFor(job gangway.JobID, members []gangway.Member) {
	for _, m := range members {
		i := se.nodeIndex(m.NodeID)
		if i < 0 {
			continue
		}
		for _, g := range m.GPUs {
			if g >= 0 && g < len(se.view.free[i]) {
				se.view.reserve(i, g, se.view.now, job)
			}
		}
	}
}

// runningAt reports whether job runs at attempt, as the snapshot found it.
func (se *Session) runningAt(job gangway.JobID, attempt int) bool {
	return slices.ContainsFunc(se.running[:se.placedFrom], func(a gangway.Assignment) bool {
		return a.JobID == job && a.Attempt == attempt
	})
}

// stillDefragmenting is j's reason while a defragmentation planned for it
// earlier is under way: some job it moves is still running, or the
// destination's GPUs are not all free yet (a moved job's allocation is
// released, but its node still reports the task until its next
// heartbeat). Once they are, j fits on its reserved destination (and was
// placed) unless the fleet changed under it; then the plan is void and j
// is explained, and may be planned for, afresh. (A destination GPU that
// fails meanwhile keeps the plan under way until the dispatch loop's
// timeout lapses it.)
func (se *Session) stillDefragmenting(j *gangway.QueueEntry) (Unplaced, bool) {
	p := se.defrags[j.JobID]
	if p == nil {
		return Unplaced{}, false
	}
	moving := slices.ContainsFunc(p.Moves, func(m Move) bool { return se.runningAt(m.JobID, m.Attempt) })
	if !moving && !se.clearing(p) {
		return Unplaced{}, false
	}
	return Unplaced{JobID: j.JobID, Reason: ReasonDefragmenting, Detail: defragDetail(j, p)}, true
}

// clearing reports whether some GPU of p's destination has less free than
// its member takes.
func (se *Session) clearing(p *DefragPlan) bool {
	for _, m := range p.Dest {
		i := se.nodeIndex(m.NodeID)
		if i < 0 {
			return false // the node is gone: the plan is void
		}
		for _, g := range m.GPUs {
			if g >= 0 && g < len(se.view.free[i]) && se.view.free[i][g] < orWhole(m.Milli) {
				return true
			}
		}
	}
	return false
}

func defragDetail(j *gangway.QueueEntry, p *DefragPlan) string {
	jobs := "jobs"
	if len(p.Moves) == 1 {
		jobs = "job"
	}
	return fmt.Sprintf("%s: waiting for defragmentation: moving %d %s (%s), about %.0f GPU-seconds lost; GPUs on %s reserved for it",
		describeShape(j), len(p.Moves), jobs, strings.Join(p.Movers(), ", "), p.LostGPUSeconds, strings.Join(p.Nodes(), ", "))
}

// mover is a running job a defragmentation may move.
type mover struct {
	idx  int // in se.running
	node int
	cost float64
}

// defrag plans the fewest moves that let fragmented job j fit, the
// cheapest such set, within the budget left; the plan is applied to the
// session (the moved jobs become victims, the destinations are reserved)
// before it returns.
//
// The search considers maxDefragCandidates movable jobs: first those on
// the nodes that their own movable jobs can make room on for a replica of
// j, fewest needed first, then the others on the nodes j may use (they may
// make room for a moved job to land), cheapest first. It tries sets of 1,
// 2, ... maxDefragMoves of them, cheapest first within a size: a set
// passes a count of what it would free (whole GPUs, CPU and memory per
// node, enough for j's replicas) before it is simulated — the moved jobs
// gone, j placed as the engine would place it, then each moved job,
// largest first, placed as the engine would place it on the fleet left.
// The first set that passes is the plan.
func (se *Session) defrag(j *gangway.QueueEntry) (DefragPlan, bool) {
	d := &se.opts.Defrag
	v := se.view
	movesLeft := min(d.MaxMovesPerHour-d.Spent.Moves-se.defragSpent.Moves, maxDefragMoves)
	lostLeft := d.MaxLostGPUSecondsPerHour - d.Spent.LostGPUSeconds - se.defragSpent.LostGPUSeconds
	if movesLeft < 1 || lostLeft < 0 || j.GPUsPerReplica == 0 || j.Share() || !d.Open(v.now) {
		return DefragPlan{}, false
	}
	defer func(p string) { v.placing = p }(v.placing)
	v.placing, v.avoidFlaky = j.JobID, avoidsFlaky(j)
	end := v.jobEnd(j)

	// How many replicas of j each node it may use holds now.
	held := map[int]int{}
	replicas := 0
	for i := range v.nodes {
		if v.nodes[i].Schedulable && se.mayUse(j, i) {
			held[i] = se.replicasAfter(j, i, end, nil)
			replicas += held[i]
		}
	}
	cands, room := se.movers(j, held, end, lostLeft)
	if len(cands) == 0 || (!room && j.Replicas == 1) {
		return DefragPlan{}, false // no node can be cleared for it
	}

	type trial struct {
		set  []int // indexes into cands
		cost float64
	}
	trials := 0
	for size := 1; size <= min(movesLeft, len(cands)); size++ {
		var ts []trial
		forCombinations(len(cands), size, func(set []int) {
			cost := 0.0
			for _, c := range set {
				cost += cands[c].cost
			}
			if cost <= lostLeft && se.freesEnough(j, held, replicas, cands, set, end) {
				ts = append(ts, trial{slices.Clone(set), cost})
			}
		})
		slices.SortStableFunc(ts, func(a, b trial) int { return cmp.Compare(a.cost, b.cost) })
		for _, t := range ts {
			if trials++; trials > maxDefragTrials {
				return DefragPlan{}, false
			}
			idx := make([]int, len(t.set))
			for k, c := range t.set {
				idx[k] = cands[c].idx
			}
			if p, ok := se.tryMoves(j, idx); ok {
				se.applyDefrag(&p)
				return p, true
			}
		}
	}
	return DefragPlan{}, false
}

// movers lists the running jobs that may move for j, best first (see
// defrag), and whether any node can be made to hold one more replica of j
// by moving its own. Movable are jobs started before
// this call that are preemptible, checkpoint, have no higher priority and
// run on one node j may use (held lists them), with a newest checkpoint
// (or start) within MaxCheckpointAge, each within the GPU-seconds left.
func (se *Session) movers(j *gangway.QueueEntry, held map[int]int, end time.Time, lostLeft float64) ([]mover, bool) {
	d := &se.opts.Defrag
	maxAge := cmp.Or(d.MaxCheckpointAge, DefaultMaxCheckpointAge)
	now := se.view.now
	var all []mover
	for k := range se.running[:se.placedFrom] {
		r := &se.running[k]
		if se.victims[r.JobID] || !r.Preemptible || !r.Checkpointable || r.Priority > j.Priority ||
			len(r.Members) != 1 || len(r.Members[0].GPUs) == 0 || r.JobID == j.JobID {
			continue
		}
		i := se.nodeIndex(r.Members[0].NodeID)
		if _, ok := held[i]; !ok || now.Sub(lastSaved(r)) > maxAge {
			continue
		}
		if cost := moveCost(r, now, d.RestartOverhead); cost <= lostLeft {
			all = append(all, mover{idx: k, node: i, cost: cost})
		}
	}
	byID := func(a, b mover) int { return strings.Compare(se.running[a.idx].JobID, se.running[b.idx].JobID) }
	slices.SortStableFunc(all, func(a, b mover) int { return cmp.Or(cmp.Compare(a.cost, b.cost), byID(a, b)) })

	// The nodes that can be made to hold one more replica by moving
	// their movable jobs — all of them: removing more never holds fewer,
	// so a node this does not help cannot take a replica of j for any set
	// — with how many it takes, most GPUs first (at most all).
	type clearable struct {
		node, need int
		cost       float64
	}
	byNode := map[int][]mover{}
	for _, m := range all {
		byNode[m.node] = append(byNode[m.node], m)
	}
	var nodes []clearable
	for i, ms := range byNode {
		ms = slices.Clone(ms)
		slices.SortStableFunc(ms, func(a, b mover) int {
			return cmp.Compare(gpuMilli(&se.running[b.idx]), gpuMilli(&se.running[a.idx]))
		})
		rs := make([]*gangway.Assignment, len(ms))
		for k, m := range ms {
			rs[k] = &se.running[m.idx]
		}
		if se.replicasAfter(j, i, end, rs) <= held[i] {
			continue
		}
		c := clearable{node: i, need: len(ms)}
		for k := range rs {
			c.cost += ms[k].cost
			if se.replicasAfter(j, i, end, rs[:k+1]) > held[i] {
				c.need = k + 1
				break
			}
		}
		nodes = append(nodes, c)
	}
	slices.SortFunc(nodes, func(a, b clearable) int {
		return cmp.Or(cmp.Compare(a.need, b.need), cmp.Compare(a.cost, b.cost), strings.Compare(se.view.nodes[a.node].ID, se.view.nodes[b.node].ID))
	})
	out := make([]mover, 0, maxDefragCandidates)
	taken := map[int]bool{}
	for _, n := range nodes {
		for _, m := range byNode[n.node] {
			if len(out) < maxDefragCandidates && !taken[m.idx] {
				out, taken[m.idx] = append(out, m), true
			}
		}
	}
	for _, m := range all {
		if len(out) < maxDefragCandidates && !taken[m.idx] {
			out, taken[m.idx] = append(out, m), true
		}
	}
	return out, len(nodes) > 0
}

// gpuMilli is the milli-GPU a running job holds.
func gpuMilli(r *gangway.Assignment) int { return r.GPUCount() * milliOf(r) }

// replicasAfter is how many replicas of j node i holds — by whole GPUs it
// may use, CPU and memory — once the running jobs rs, all on node i, are
// gone.
func (se *Session) replicasAfter(j *gangway.QueueEntry, i int, end time.Time, rs []*gangway.Assignment) int {
	v := se.view
	cpu, mem := v.cpu[i], v.mem[i]
	for _, r := range rs {
		cpu += r.CPUMilli
		mem += r.MemMiB
	}
	whole := 0
	for g, f := range v.free[i] {
		if !v.nodes[i].GPUs[g].Healthy || !v.usable(i, g, end) {
			continue
		}
		for _, r := range rs {
			if slices.Contains(r.Members[0].GPUs, g) {
				f += milliOf(r)
			}
		}
		if f >= Whole {
			whole++
		}
	}
	return min(whole/j.GPUsPerReplica, perResource(cpu, j.CPUMilli), perResource(mem, j.MemMiB))
}

// lastSaved is when r last saved its work: its newest checkpoint, or its
// start before the first.
func lastSaved(r *gangway.Assignment) time.Time {
	if r.LastCheckpoint.After(r.At) {
		return r.LastCheckpoint
	}
	return r.At
}

// moveCost is the GPU-seconds moving r at now costs: its GPU time since
// it last saved plus a restart, per GPU share it holds.
func moveCost(r *gangway.Assignment, now time.Time, overhead time.Duration) float64 {
	gpus := float64(r.GPUCount()) * float64(milliOf(r)) / Whole
	return (max(now.Sub(lastSaved(r)), 0).Seconds() + overhead.Seconds()) * gpus
}

// freesEnough counts what moving set would free: whether the nodes j may
// use would then hold j's replicas (replicasAfter; topology and the rest
// are left to the simulation).
func (se *Session) freesEnough(j *gangway.QueueEntry, held map[int]int, replicas int, cands []mover, set []int, end time.Time) bool {
	var buf [maxDefragMoves]*gangway.Assignment
	done := 0 // the set's movers are grouped by node, one node at a time
	for done < len(set) {
		node := cands[set[done]].node
		rs := buf[:0]
		for _, c := range set {
			if cands[c].node == node {
				rs = append(rs, &se.running[cands[c].idx])
			}
		}
		seen := false
		for _, c := range set[:done] {
			seen = seen || cands[c].node == node
		}
		if !seen {
			replicas += se.replicasAfter(j, node, end, rs) - held[node]
		}
		done++
	}
	return replicas >= j.Replicas
}

// tryMoves simulates moving the running jobs at idx: they leave, j is
// placed, then each of them, largest first, must be placed on the fleet
// left. The view and quotas are as they were when it returns.
func (se *Session) tryMoves(j *gangway.QueueEntry, idx []int) (DefragPlan, bool) {
	v := se.view
	mark := v.begin()
	for _, k := range idx {
		se.vacate(&se.running[k], -1)
	}
	defer func() {
		v.rollback(mark)
		for _, k := range idx {
			se.vacate(&se.running[k], +1)
		}
	}()
	a, ok := se.placeJob(j)
	if !ok {
		return DefragPlan{}, false
	}
	order := slices.Clone(idx)
	slices.SortStableFunc(order, func(x, y int) int {
		rx, ry := &se.running[x], &se.running[y]
		return cmp.Or(cmp.Compare(ry.GPUCount()*milliOf(ry), rx.GPUCount()*milliOf(rx)), strings.Compare(rx.JobID, ry.JobID))
	})
	p := DefragPlan{Job: j.JobID, At: v.now, Dest: a.Members}
	for _, k := range order {
		r := &se.running[k]
		e := se.moverEntry(r)
		b, ok := se.placeJob(&e)
		if !ok {
			return DefragPlan{}, false
		}
		cost := moveCost(r, v.now, se.opts.Defrag.RestartOverhead)
		p.Moves = append(p.Moves, Move{JobID: r.JobID, Attempt: r.Attempt, GPUs: float64(r.GPUCount()) * float64(milliOf(r)) / Whole,
			From: r.Members[0].NodeID, To: b.Members, LostGPUSeconds: cost})
		p.LostGPUSeconds += cost
	}
	return p, true
}

// moverEntry is running job r as a queue entry, to place it elsewhere: its
// shape, on its current node's GPU model and pool (the running record
// does not carry the job's own constraints, and those two it surely
// allows).
func (se *Session) moverEntry(r *gangway.Assignment) gangway.QueueEntry {
	m := r.Members[0]
	n := &se.view.nodes[se.nodeIndex(m.NodeID)]
	e := gangway.QueueEntry{JobID: r.JobID, Team: r.Team, Project: r.Project, Priority: r.Priority, Attempt: r.Attempt,
		Replicas: 1, GPUsPerReplica: len(m.GPUs), CPUMilli: r.CPUMilli, MemMiB: r.MemMiB, MaxRuntime: r.MaxRuntime,
		Preemptible: r.Preemptible, Checkpointable: r.Checkpointable, GPUModels: []string{n.Model}, Pools: []string{n.Pool}}
	if m.Share() {
		e.GPUMilli = m.Milli
	}
	return e
}

// applyDefrag makes a new plan part of this call: its moved jobs are
// victims, its destinations reserved, its cost spent.
func (se *Session) applyDefrag(p *DefragPlan) {
	se.noteDefrag(p)
	se.reserveFor(p.Job, p.Dest)
	for _, m := range p.Moves {
		se.victims[m.JobID] = true
		se.reserveFor(m.JobID, m.To)
	}
	se.defragSpent.Moves += len(p.Moves)
	se.defragSpent.LostGPUSeconds += p.LostGPUSeconds
}

// forCombinations calls f with every size-k subset of [0, n), in
// lexicographic order; f must not keep the slice.
func forCombinations(n, k int, f func([]int)) {
	if k > n || k <= 0 {
		return
	}
	set := make([]int, k)
	for i := range set {
		set[i] = i
	}
	for {
		f(set)
		i := k - 1
		for i >= 0 && set[i] == n-k+i {
			i--
		}
		if i < 0 {
			return
		}
		set[i]++
		for j := i + 1; j < k; j++ {
			set[j] = set[j-1] + 1
		}
	}
}
