package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
)

// Options tune placement. The zero value is first-fit in priority order
// with no reservations and no preemption.
type Options struct {
	// Scorer ranks candidate nodes; nil means FirstFit.
	Scorer Scorer
	// Seed seeds the random source scorers and tie-breaks draw from.
	Seed uint64
	// MaxAssignments caps how many jobs one plan starts (0 = no cap).
	MaxAssignments int
	// Workload is the typical workload fragmentation is measured against;
	// nil derives it from the queue.
	Workload []WorkloadClass
	// Demand is the whole job mix, when Workload keeps only part of it (the
	// FGD protocol's typical workload drops the rarest classes): the
	// default policy reads from it what share of the demand is bound to
	// which GPU models, the shares to pack, the multi-GPU classes to keep
	// room for, and whether the mix asks more CPU than the fleet has.
	// nil: Workload.
	Demand []WorkloadClass
	// Fairness weighs teams within a priority class.
	Fairness Fairness
	// Quotas limit teams per GPU model, with borrowing within cohorts.
	Quotas []Quota
	// Reservations is how many blocked jobs (highest first) get GPUs
	// reserved for when running jobs end; smaller jobs backfill around them
	// only if they end first. 0 turns reservations off.
	Reservations int
	// Preempt lets a job stop lower-priority preemptible jobs, or borrowers
	// of its team's lent quota, when that makes it fit.
	Preempt bool
	// MinRuntime protects jobs that started less than this ago from
	// preemption.
	MinRuntime time.Duration
	// Defrag moves cheap running jobs elsewhere when a job waits only
	// because the free GPUs are scattered (defrag.go); the zero value is
	// off.
	Defrag Defrag
	// Offers is the cloud capacity jobs that may burst can rent now;
	// BurstAfter is how long a job's on-prem wait, waited so far plus
	// expected yet, must be before renting pays off; Teams caps what each
	// team may pay (less what it has committed: Session.committed);
	// RestartOverhead is the boot and restore time of a
	// cloud restart (burst.go).
	Offers          []gangway.Offer
	BurstAfter      time.Duration
	Teams           map[string]TeamPolicy
	RestartOverhead time.Duration
	// Predicted is, per running or queued job, how long the start-time
	// estimator (placement/forecast) expects its run to last, learned
	// from history (a running job's conditioned on how long it has run).
	// The burst decision reads the on-prem wait from the running jobs'
	// predicted ends and prices a job over its predicted runtime, where
	// it has them; a job with a deadline keeps to the declared runtimes
	// (a deadline met at the median is missed half the time), and so do
	// reservations and backfill. nil: the declared runtimes everywhere.
	Predicted map[gangway.JobID]time.Duration
	// ExpectedStarts is, per waiting job, when the start-time estimator
	// expects it to start on-prem (its P50: the queue played forward by
	// this engine, calibrated on the starts seen). The burst decision
	// reads a job's on-prem wait from it where it has one, in place of the
	// running jobs' ends; not for a job with a deadline.
	ExpectedStarts map[gangway.JobID]time.Time
	// SampleNodes bounds how many feasible nodes are scored per replica
	// (0: all), starting where the previous search stopped, as Kubernetes'
	// percentageOfNodesToScore does: on very large fleets it trades a
	// little placement quality for a bounded cycle time.
	SampleNodes int

	// eachNode turns node classes off (classes.go): every feasible node is
	// scored. Tests compare the plans both ways.
	eachNode bool
}

// maxPreemptionSearches bounds how many blocked jobs look for victims per
// Place call: each search simulates placements, and the next cycle can
// continue where this one stopped.
const maxPreemptionSearches = 8

// Placer is the seam the dispatch loop and the simulator call through.
type Placer interface {
	Place(s Snapshot, queue []gangway.QueueEntry, o Options) Plan
}

// Engine is Gangway's placement engine as a Placer.
type Engine struct{}

var _ Placer = Engine{}

// Place implements Placer.
func (Engine) Place(s Snapshot, queue []gangway.QueueEntry, o Options) Plan {
	return Place(s, queue, o)
}

// Place decides, for one snapshot, which queued jobs start where and why
// the others wait. It is pure: the same snapshot, queue and options always
// give the same plan.
func Place(s Snapshot, queue []gangway.QueueEntry, o Options) Plan {
	o.Workload = WorkloadOr(o.Workload, queue)
	return NewSession(s, o).Place(queue)
}

// Session is placement over a view that persists between calls: the trace
// simulator places one arrival at a time and releases departures without
// rebuilding the fleet, through the same code Place runs.
type Session struct {
	opts    Options
	view    *View
	scorer  Scorer
	all     []int // every node index, for ungrouped placement
	groups  map[gangway.Level][]*group
	nodeIdx map[string]int
	// running is every allocation: the snapshot's and this session's.
	running []gangway.Assignment
	quota   *quotaBook
	// victims are running jobs already chosen for preemption.
	victims map[string]bool
	// placedFrom is where this Place call's own placements begin in
	// running: they are never victims in the plan that starts them.
	placedFrom int
	// held is capacity set aside for preemptors until this Place call
	// returns.
	held []heldCap
	// bestGPUs holds the best candidate's GPUs while best scans on.
	bestGPUs []int
	// cursor is where the next sampled search starts.
	cursor int
	// epoch counts changes to the view in this session; failed caches
	// why jobs of one shape did not fit at an epoch, so a long queue of
	// alike jobs that cannot fit is not searched and explained again.
	epoch  int
	failed map[shapeKey]failure
	// byModel lists node indexes by GPU model, in index order (built on
	// first use): a job pinned to one model scans only those nodes.
	byModel map[string][]int
	// largest caches largestGroup.
	largest map[string]int
	// classed is the scorer when it may score node classes (classes.go)
	// rather than every node; cls are the classes.
	classed ClassScorer
	cls     classes
	// ends is running by end (endOrder), up to running[:endsFor].
	ends    []ending
	endsFor int
	// base is this Place call's commitments per team; burstSpent what
	// the session's bursts are expected to cost (committed).
	base, burstSpent map[string]float64
	// defrags are this Place call's defragmentations under way, by the
	// job they make room for; holders are the jobs GPUs are reserved for
	// by one (the job and the jobs moved); defragSpent is what this call
	// planned (defrag.go).
	defrags     map[gangway.JobID]*DefragPlan
	holders     map[gangway.JobID]bool
	defragSpent DefragSpent
}

// NewSession starts a session on a snapshot.
func NewSession(s Snapshot, o Options) *Session {
	sc := o.Scorer
	if sc == nil {
		sc = FirstFit{}
	}
	v := newView(&s, o.Workload, rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)))
	if o.Demand != nil {
		v.demand = o.Demand
	}
	if p, ok := sc.(Preparer); ok {
		p.Prepare(v)
	}
	se := &Session{opts: o, view: v, scorer: sc, all: make([]int, len(s.Nodes)), groups: map[gangway.Level][]*group{},
		nodeIdx: make(map[string]int, len(s.Nodes)), running: slices.Clone(s.Running),
		quota: newQuotaBook(o.Quotas), victims: map[string]bool{}, failed: map[shapeKey]failure{}}
	for i := range se.all {
		se.all[i] = i
		se.nodeIdx[s.Nodes[i].ID] = i
	}
	if cs, ok := sc.(ClassScorer); ok && !o.eachNode && o.SampleNodes == 0 {
		se.classed = cs
	}
	for i := range se.running {
		r := &se.running[i]
		for _, m := range r.Members {
			se.quota.charge(r.Team, se.modelOf(m.NodeID), meteredMilli(m))
		}
	}
	return se
}

// View is the session's current free capacity.
func (se *Session) View() *View { return se.view }

// SetNow moves the session's clock (the simulator's virtual time).
func (se *Session) SetNow(t time.Time) {
	se.view.now = t
	se.epoch++
}

// Place places what it can of queue — in priority order, fair share
// across teams within a priority, oldest first within a team — applies the
// assignments to the session's view and returns the plan.
func (se *Session) Place(queue []gangway.QueueEntry) Plan {
	se.view.clearReservations()
	se.epoch++ // the last call's reservations and holds are gone
	se.placedFrom = len(se.running)
	se.endsFor = 0 // running may have changed between calls
	se.base = nil
	if len(se.opts.Teams) > 0 {
		se.base = se.commitments(queue) // before this call places anything: a job placed from the queue counts once
	}
	defer se.releaseHeld()
	se.resumeDefrags(queue)
	jobs := make([]*gangway.QueueEntry, len(queue))
	for i := range queue {
		jobs[i] = &queue[i]
		if se.classed != nil {
			se.cls.demand(queue[i].CPUMilli, queue[i].MemMiB) // once for the queue, not job by job
		}
	}
	ord := newOrderer(jobs, se)
	var plan Plan
	var blockedJobs, blockedPrio, searches, defragSearches int
	var blocked queuedAhead // the blocked jobs so far
	// wait leaves j waiting for u: counted among the blocked jobs ahead of
	// the rest, unless the burst decision sends it to the cloud. A job
	// whose shape failed at this epoch comes here too, with the first
	// one's reason: alike jobs are alike on-prem, not in whether each has
	// waited long enough to burst.
	wait := func(j *gangway.QueueEntry, u Unplaced) {
		b, refused, ok := se.burst(j, u, plan.Reservations, blocked)
		if refused != "" {
			u.Detail += "; not bursting: " + refused
		}
		plan.Unplaced = append(plan.Unplaced, u)
		if ok {
			plan.Bursts = append(plan.Bursts, b)
			se.commit(b)
			return // it leaves the queue
		}
		if u.Reason.Retry() {
			blockedJobs++
			blocked.add(se, j, 1)
			blockedPrio = max(blockedPrio, j.Priority)
		}
	}
	for {
		j, ok := ord.next()
		if !ok {
			break
		}
		if se.opts.MaxAssignments > 0 && len(plan.Assignments) >= se.opts.MaxAssignments {
			plan.Unplaced = append(plan.Unplaced, Unplaced{JobID: j.JobID, Reason: ReasonPlanFull,
				Detail: planFullDetail(se.opts.MaxAssignments)})
			continue
		}
		// A job GPUs are reserved for does not share alike jobs' fate:
		// it may use them.
		holder := se.holders[j.JobID]
		key := shapeOf(j)
		f, seen := se.failed[key]
		if seen && f.epoch == se.epoch && !holder {
			u := f.u
			u.JobID = j.JobID
			wait(j, u)
			continue
		}
		if a, ok := se.placeJob(j); ok {
			se.epoch++
			plan.Assignments = append(plan.Assignments, a)
			se.started(j, a)
			for _, m := range a.Members {
				se.changed(se.nodeIndex(m.NodeID))
			}
			ord.charge(j.Team, jobUsage(j))
			continue
		}
		if u, ok := se.stillDefragmenting(j); ok {
			plan.Unplaced = append(plan.Unplaced, u)
			continue
		}
		se.view.placing = j.JobID
		u := se.explain(j)
		if u.Reason == ReasonFragmented && se.opts.Defrag.Enabled && defragSearches < maxDefragSearches {
			defragSearches++
			if p, ok := se.defrag(j); ok {
				se.epoch++
				plan.Defrags = append(plan.Defrags, p)
				u.Reason, u.Detail = ReasonDefragmenting, defragDetail(j, &p)
			}
		}
		if u.Reason.Retry() && u.Reason != ReasonQuota && u.Reason != ReasonDefragmenting && se.opts.Preempt && searches < maxPreemptionSearches {
			searches++
			if p, ok := se.preempt(j); ok {
				se.epoch++
				plan.Preemptions = append(plan.Preemptions, p)
				u.Reason, u.Detail = ReasonPreempting, preemptDetail(p)
			}
		}
		if u.Reason.Retry() && u.Reason != ReasonPreempting && u.Reason != ReasonDefragmenting && u.Reason != ReasonQuota &&
			len(plan.Reservations) < se.opts.Reservations {
			if r, why, ok := se.reserve(j); ok {
				se.epoch++
				plan.Reservations = append(plan.Reservations, r)
				u.Reason, u.Detail = ReasonReservation, why
			}
		}
		if blockedJobs > 0 && blockedPrio > j.Priority && u.Reason == ReasonInsufficientGPUs {
			u.Detail += fmt.Sprintf("; behind %d higher-priority jobs needing %d GPUs", blockedJobs, blocked.gpus)
		}
		if u.Reason != ReasonPreempting && u.Reason != ReasonReservation && u.Reason != ReasonDefragmenting && !holder {
			se.failed[key] = failure{epoch: se.epoch, u: u}
		}
		wait(j, u)
	}
	return plan
}

// started records a placement: quota, and the assignment as the running
// allocation that later reservations and preemptions see.
func (se *Session) started(j *gangway.QueueEntry, a gangway.Assignment) {
	for _, m := range a.Members {
		se.quota.charge(j.Team, se.modelOf(m.NodeID), meteredMilli(m))
	}
	se.running = append(se.running, a)
}

func (se *Session) modelOf(nodeID string) string {
	if i, ok := se.nodeIdx[nodeID]; ok {
		return se.view.nodes[i].Model
	}
	return ""
}

func orWhole(milli int) int {
	if milli <= 0 {
		return Whole
	}
	return milli
}

// shapeKey is what decides whether a job fits: two jobs with the same key
// fit or fail alike on the same view.
type shapeKey struct {
	replicas, gpus, milli int
	mig                   string
	cpu, mem              int64
	models, pools, team   string
	nodes                 string
	topology              gangway.Topology
	maxRuntime            time.Duration
}

func shapeOf(j *gangway.QueueEntry) shapeKey {
	return shapeKey{replicas: j.Replicas, gpus: j.GPUsPerReplica, milli: j.GPUMilli, mig: j.MIGProfile, cpu: j.CPUMilli, mem: j.MemMiB,
		models: strings.Join(j.GPUModels, "|"), pools: strings.Join(j.Pools, "|"), team: j.Team, nodes: strings.Join(j.Nodes, "|"),
		topology: j.Topology, maxRuntime: j.MaxRuntime}
}

type failure struct {
	epoch int
	u     Unplaced
}

// Release ends a running allocation in the session: its capacity and
// quota go back, and a job that runs again may be chosen as a victim again.
// It reports whether the job was running. The start-time forecast
// (placement/forecast) replays departures through it.
func (se *Session) Release(jobID gangway.JobID) bool {
	at := slices.IndexFunc(se.running, func(r gangway.Assignment) bool { return r.JobID == jobID })
	if at < 0 {
		return false
	}
	r := se.running[at]
	se.vacate(&r, -1)
	se.running = slices.Delete(se.running, at, at+1)
	if at < se.placedFrom {
		se.placedFrom--
	}
	delete(se.victims, jobID)
	se.epoch++
	for _, m := range r.Members {
		if i := se.nodeIndex(m.NodeID); i >= 0 {
			se.changed(i)
		}
	}
	return true
}

func (se *Session) nodeIndex(id string) int {
	if i, ok := se.nodeIdx[id]; ok {
		return i
	}
	return -1
}

func (se *Session) changed(i int) {
	if c, ok := se.scorer.(Committer); ok {
		c.Changed(se.view, i)
	}
}

// placeJob places every replica of j in one transaction, honouring its
// topology constraint, or leaves the view untouched.
func (se *Session) placeJob(j *gangway.QueueEntry) (gangway.Assignment, bool) {
	v := se.view
	v.avoidFlaky = avoidsFlaky(j)
	v.placing = j.JobID
	var members []gangway.Member
	ok := false
	switch {
	case j.Topology.Level == gangway.LevelNone:
		members, ok = se.placeIn(j, nil)
	default:
		members, ok = se.placeGrouped(j)
		if !ok && !j.Topology.Required {
			members, ok = se.placeIn(j, nil)
		}
	}
	if !ok {
		return gangway.Assignment{}, false
	}
	// Complete, as dispatch commits it and as later cycles (and this
	// session) read it back as a running allocation.
	return gangway.Assignment{JobID: j.JobID, Attempt: j.Attempt, Members: members, At: v.now,
		Team: j.Team, Project: j.Project, Priority: j.Priority, MaxRuntime: j.MaxRuntime, Runtime: j.Runtime,
		Kept: j.Kept, Preemptible: j.Preemptible, Checkpointable: j.Checkpointable, CPUMilli: j.CPUMilli, MemMiB: j.MemMiB}, true
}

// placeIn places all replicas of j on nodes (and GPUs) allowed by g, one
// replica at a time on the best-scoring candidate, in a transaction.
func (se *Session) placeIn(j *gangway.QueueEntry, g *group) ([]gangway.Member, bool) {
	v := se.view
	mark := v.begin()
	members := make([]gangway.Member, 0, j.Replicas)
	for rank := range j.Replicas {
		c, ok := se.best(j, g)
		if !ok {
			v.rollback(mark)
			return nil, false
		}
		v.take(c, j.CPUMilli, j.MemMiB)
		n := &v.nodes[c.Node]
		m := gangway.Member{Rank: rank, NodeID: n.ID, Pool: n.Pool, Addr: n.Addr, TaskQueue: n.TaskQueue, GPUs: c.GPUs,
			PricePerGPUHour: n.PricePerGPUHour}
		if n.CapacityType != gangway.CapacityOnPrem {
			m.CapacityType = n.CapacityType // "" means on-prem
		}
		switch {
		case j.MIGProfile != "" && j.GPUsPerReplica > 0:
			m.MIG, m.MIGMilli = j.MIGProfile, gangway.MIGMilli(n.Model, j.MIGProfile)
		case j.Share():
			m.Milli = c.Milli
		}
		members = append(members, m)
	}
	v.commit(mark)
	return members, true
}

// best is the highest-scoring feasible candidate for one replica.
func (se *Session) best(j *gangway.QueueEntry, g *group) (Candidate, bool) {
	v := se.view
	var best Candidate
	bestScore, found := 0.0, false
	if g == nil && se.classed != nil && len(j.Nodes) == 0 && j.MIGProfile == "" {
		return se.bestOfClasses(j)
	}
	// FirstFit prefers the lowest node index and nodes come in index order,
	// so its first feasible candidate is its best: stop there.
	_, firstFit := se.scorer.(FirstFit)
	nodes := g.nodeList(se.all)
	if g == nil && len(j.GPUModels) == 1 {
		nodes = se.nodesOf(j.GPUModels[0])
	}
	sample := se.opts.SampleNodes > 0 && !firstFit && len(nodes) > se.opts.SampleNodes
	start, scored := 0, 0
	if sample {
		start = se.cursor % len(nodes)
	}
	for k := range nodes {
		i := nodes[(start+k)%len(nodes)]
		if sample && scored == se.opts.SampleNodes {
			se.cursor = start + k
			break
		}
		if !se.feasibleNode(j, i) {
			continue
		}
		scored++
		for _, c := range v.candidates(i, j, g) {
			if firstFit {
				c.GPUs = slices.Clone(c.GPUs)
				return c, true
			}
			var s float64
			if j.MIGProfile != "" {
				s = v.migScore(c, j)
			} else {
				s = se.scorer.Score(v, c, j)
			}
			if !found || s > bestScore {
				// c.GPUs lives in the view's scratch space until the next
				// candidates call: keep a copy.
				se.bestGPUs = append(se.bestGPUs[:0], c.GPUs...)
				best, bestScore, found = c, s, true
			}
		}
	}
	if found && best.GPUs != nil {
		best.GPUs = slices.Clone(se.bestGPUs)
	}
	return best, found
}

// nodesOf is the nodes with GPU model m, in index order.
func (se *Session) nodesOf(m string) []int {
	if se.byModel == nil {
		se.byModel = map[string][]int{}
		for i := range se.view.nodes {
			model := se.view.nodes[i].Model
			se.byModel[model] = append(se.byModel[model], i)
		}
	}
	return se.byModel[m]
}

func allowed[S ~string](list []S, v S) bool { return len(list) == 0 || slices.Contains(list, v) }

// jobEnd is when j would finish if started now (zero: unknown, never
// before a reservation).
func (v *View) jobEnd(j *gangway.QueueEntry) time.Time {
	if j.MaxRuntime <= 0 {
		return time.Time{}
	}
	return v.now.Add(j.MaxRuntime)
}

// candidates lists the ways one replica of j fits on node i: for whole
// GPUs one choice, packed into as few NVLink domains as possible (and the
// tightest domain that holds them); for a share, one choice per distinct
// free level among the GPUs with room. The slice and the candidates' GPUs
// are scratch space, valid until the next call.
func (v *View) candidates(i int, j *gangway.QueueEntry, g *group) []Candidate {
	end := v.jobEnd(j)
	out := v.cands[:0]
	switch {
	case j.GPUsPerReplica == 0:
		out = append(out, Candidate{Node: i, Milli: Whole})
	case j.MIGProfile != "":
		if gpus := v.pickMIG(i, j.GPUsPerReplica, j.MIGProfile, end, g); gpus != nil {
			out = append(out, Candidate{Node: i, GPUs: gpus, Milli: Whole})
		}
	case j.Share():
		free := v.free[i]
		// One GPU index per candidate, all in one buffer that does not
		// grow while candidates point into it.
		if cap(v.scratch) < len(free) {
			v.scratch = make([]int, 0, len(free))
		}
		buf := v.scratch[:0]
		var seen [Whole + 1]bool
		for gi, f := range free {
			if f >= j.GPUMilli && !seen[f] && v.usable(i, gi, end) && g.allowsGPU(v, i, gi) {
				seen[f] = true
				buf = append(buf, gi)
				out = append(out, Candidate{Node: i, GPUs: buf[len(buf)-1 : len(buf) : len(buf)], Milli: j.GPUMilli})
			}
		}
	default:
		if gpus := v.pickWhole(i, j.GPUsPerReplica, end, g); gpus != nil {
			out = append(out, Candidate{Node: i, GPUs: gpus, Milli: Whole})
		}
	}
	v.cands = out
	return out
}

// pickMIG chooses k free MIG devices of profile on node i that a job
// ending at end may use within group g, lowest index first. Nil if fewer
// than k. The result is scratch space, valid until the next call.
func (v *View) pickMIG(i, k int, profile string, end time.Time, g *group) []int {
	if v.mig == nil || v.mig[i] == nil {
		return nil
	}
	out := v.scratch[:0]
	for gi := range v.mig[i] {
		if v.migFree(i, gi, profile, end) && g.allowsGPU(v, i, gi) {
			if out = append(out, gi); len(out) == k {
				break
			}
		}
	}
	v.scratch = out
	if len(out) < k {
		return nil
	}
	return out
}

// migScore ranks a MIG candidate: the node with the fewest free devices
// of the profile first, so that nodes with many stay whole for gangs of
// them; ties go to the lowest node index (the scan's order). MIG devices
// are fixed partitions any job of the profile fits alike, so the policy's
// scorer, which weighs how a placement fragments whole GPUs, has nothing
// to tell them apart by.
func (v *View) migScore(c Candidate, j *gangway.QueueEntry) float64 {
	return -float64(v.FreeMIG(c.Node, j.MIGProfile))
}

// pickWhole chooses k entirely free GPUs on node i that a job ending at end
// may use within group g: from the smallest NVLink domain that holds all k
// (keeping larger domains whole for larger requests), else from the largest
// domains first. Nil if fewer than k. The result is scratch space, valid
// until the next call.
func (v *View) pickWhole(i, k int, end time.Time, g *group) []int {
	type dom struct {
		name string
		n    int
	}
	var domBuf [8]dom
	doms := domBuf[:0]
	gpus := v.nodes[i].GPUs
	ok := func(gi int) bool {
		return v.free[i][gi] == Whole && v.usable(i, gi, end) && g.allowsGPU(v, i, gi)
	}
	if v.oneDomain[i] { // one domain: its first k free GPUs
		out := v.scratch[:0]
		for gi := range v.free[i] {
			if ok(gi) {
				if out = append(out, gi); len(out) == k {
					break
				}
			}
		}
		v.scratch = out
		if len(out) < k {
			return nil
		}
		return out
	}
	total := 0
	for gi := range v.free[i] {
		if !ok(gi) {
			continue
		}
		name := gpus[gi].Domain
		at := -1
		for d := range doms {
			if doms[d].name == name {
				at = d
				break
			}
		}
		if at < 0 {
			doms = append(doms, dom{name: name})
			at = len(doms) - 1
		}
		doms[at].n++
		total++
	}
	if total < k {
		return nil
	}
	fit := -1
	for di, d := range doms {
		if d.n >= k && (fit < 0 || d.n < doms[fit].n) {
			fit = di
		}
	}
	if fit >= 0 {
		doms[0], doms = doms[fit], doms[:1]
	} else {
		slices.SortStableFunc(doms, func(a, b dom) int { return b.n - a.n })
	}
	out := v.scratch[:0]
	for _, d := range doms {
		for gi := range v.free[i] {
			if len(out) < k && gpus[gi].Domain == d.name && ok(gi) {
				out = append(out, gi)
			}
		}
	}
	if fit < 0 {
		slices.Sort(out)
	}
	v.scratch = out
	return out
}
