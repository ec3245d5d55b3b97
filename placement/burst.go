package placement

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

// TeamPolicy caps what a team pays for cloud capacity.
type TeamPolicy struct {
	// MaxPricePerGPUHour: 0 means no cap.
	MaxPricePerGPUHour float64
	// BudgetLeft is what is left of the team's monthly budget in dollars
	// by what has been billed; NoBudget means no budget is set.
	BudgetLeft float64
	// Since is when the budget's period began (the month's start): a run
	// on cloud nodes that began before it is charged from then, the part
	// before it billed to the period before. Zero: every run whole.
	Since time.Time
	// Launching is what the team's bursts whose instances are still
	// launching are expected to cost: committed, but neither billed nor in
	// the snapshot (the dispatch loop reads it from the view's burst
	// records). The burst decision charges it with the rest (committed).
	Launching float64
}

// NoBudget marks a team without a monthly budget.
const NoBudget = -1.0

// Burst sends a waiting job to rented capacity: the offers it may use,
// cheapest expected cost first.
type Burst struct {
	JobID   gangway.JobID
	Attempt int
	// Team is the job's: its budget pays (TeamPolicy).
	Team   string
	Offers []gangway.BurstOffer
	// ETA is the on-prem wait the burst avoids (-1: never fits on-prem).
	ETA    time.Duration
	Reason string
}

// never is the ETA of a job that cannot run on-prem at all.
const never = time.Duration(-1)

// burst decides whether j, which the plan leaves waiting, should rent
// capacity instead. It does when the job allows it and either its whole
// on-prem wait (waited so far plus expected yet) is longer than BurstAfter
// or waiting would miss the deadline; it offers every allowed offer within
// the job's and team's price caps and the team's budget, cheapest expected cost to completion first. For a job
// with a deadline, which capacity it may rent is the deadline policy's
// decision (spotpolicy.RentNow with spotpolicy.BurstPolicy, the code
// `gangway replay spot` replays): spot while the slack allows, on-demand
// once it does not or as the fallback after a spot launch that finds no
// capacity, and nothing yet while waiting is safe and on-demand would not
// pay; spot first among what it may. Spot offers whose expected duration
// (interruptions included) would not finish in time are dropped too.
//
// A job that has waited, or would wait, long enough to burst but may rent
// nothing gets why instead (refused, for its reason's detail): no offer
// matches it, every one is over a price cap, the deadline policy waits, no
// offer finishes by the deadline, or its team's budget is short.
func (se *Session) burst(j *gangway.QueueEntry, u Unplaced, rs []Reservation, ahead queuedAhead) (b Burst, refused string, ok bool) {
	// Cloud offers are whole GPUs: a job on MIG devices stays on-prem.
	if !j.Burst.Enabled || len(j.Nodes) > 0 || len(se.opts.Offers) == 0 || j.MIG() {
		return Burst{}, "", false
	}
	now := se.view.now
	eta := se.onPremETA(j, u, rs, ahead)
	late := !j.Deadline.IsZero() && (eta == never || now.Add(eta+j.Runtime).After(j.Deadline))
	// The wait that counts is the whole of it: what the job has waited
	// since it was queued and what it is expected to wait yet.
	var waited time.Duration
	if !j.EnqueuedAt.IsZero() {
		waited = max(now.Sub(j.EnqueuedAt), 0)
	}
	if eta != never && waited+eta <= se.opts.BurstAfter && !late {
		return Burst{}, "", false
	}
	team := se.team(j.Team)
	rent := spotpolicy.Rent{Spot: true, OnDemand: true}
	overhead := se.opts.RestartOverhead
	if overhead <= 0 {
		overhead = spotpolicy.DefaultRestartOverhead
	}
	if st, ok := spotpolicy.QueuedState(j, now, overhead); ok {
		rent = spotpolicy.RentNow(spotpolicy.BurstPolicy(), st)
	}
	var choices []gangway.BurstOffer
	var no refusals
	for _, o := range se.opts.Offers {
		c, r := se.choose(j, o, team)
		switch {
		case r != refuseNone:
			no.add(r, c)
		case o.CapacityType == gangway.CapacitySpot && !rent.Spot || o.CapacityType != gangway.CapacitySpot && !rent.OnDemand:
			no.add(refusePolicy, c)
		case !j.Deadline.IsZero() && now.Add(c.ExpectedDuration).After(j.Deadline):
			no.add(refuseDeadline, c)
		default:
			choices = append(choices, c)
		}
	}
	if len(choices) == 0 {
		return Burst{}, no.why(j, rent, team, se.committed(j.Team)), false
	}
	slices.SortStableFunc(choices, func(a, b gangway.BurstOffer) int { return cmp.Compare(a.ExpectedCost, b.ExpectedCost) })
	if !j.Deadline.IsZero() {
		// The policy chose spot, with on-demand as its fallback.
		onDemandLast := func(o gangway.BurstOffer) int {
			if o.CapacityType == gangway.CapacitySpot {
				return 0
			}
			return 1
		}
		slices.SortStableFunc(choices, func(a, b gangway.BurstOffer) int { return cmp.Compare(onDemandLast(a), onDemandLast(b)) })
	}
	best := choices[0]
	wait := "never fits on-prem"
	if eta != never {
		wait = "on-prem ETA " + eta.Round(time.Second).String()
	}
	reason := fmt.Sprintf("%s; %s in %s costs $%.2f expected (%d×%s at $%.2f/GPU-h)", wait,
		best.CapacityType, best.Pool, best.ExpectedCost, best.Count, best.InstanceType,
		best.PricePerGPUHourFor(j.GPUsPerReplica))
	if late {
		reason += fmt.Sprintf("; the deadline %s needs it", gangway.FormatTime(j.Deadline))
	}
	return Burst{JobID: j.JobID, Attempt: j.Attempt, Team: j.Team, Offers: choices, ETA: eta, Reason: reason}, "", true
}

// refusal is why an offer is not rented for a job, in the order the
// decision checks: the later, the nearer the offer came to being rented.
type refusal int

const (
	refuseNone     refusal = iota
	refuseMatch            // pools, capacity types, GPU models, GPUs per instance
	refusePrice            // over the job's or the team's price cap
	refuseForever          // interruptions expected to keep it from ever finishing
	refuseBudget           // expected to cost more than the team has left
	refusePolicy           // the deadline policy does not take this capacity type now
	refuseDeadline         // expected to finish after the deadline
)

// refusals keeps the furthest refusal of a burst decision's offers and the
// cheapest offer refused so (by price per GPU-hour for a price cap, which
// rules an offer out before it is priced in all; else by expected cost).
type refusals struct {
	worst    refusal
	cheapest gangway.BurstOffer
}

func (n *refusals) add(r refusal, c gangway.BurstOffer) {
	cost := func(o gangway.BurstOffer) float64 {
		if r == refusePrice {
			return o.PricePerHour // the same job: the same GPUs per replica
		}
		return o.ExpectedCost
	}
	if r > n.worst || (r == n.worst && cost(c) < cost(n.cheapest)) {
		n.worst, n.cheapest = r, c
	}
}

// why says why nothing is rented, for the job's reason's detail; rent is
// what the deadline policy takes now.
func (n *refusals) why(j *gangway.QueueEntry, rent spotpolicy.Rent, team TeamPolicy, committed float64) string {
	c := n.cheapest
	switch n.worst {
	case refuseMatch:
		return "no cloud offer has its GPU model, pool and capacity type with room for a replica"
	case refusePrice:
		return fmt.Sprintf("every matching cloud offer is over its price cap (cheapest $%.2f/GPU-h)", c.PricePerGPUHourFor(j.GPUsPerReplica))
	case refusePolicy:
		switch {
		case !rent.Spot && !rent.OnDemand:
			return "its deadline leaves time to wait for on-prem GPUs"
		case !rent.Spot:
			return "its deadline leaves too little slack for spot, and no on-demand offer is within its limits"
		default:
			return "its deadline policy takes spot alone for now, and no spot offer is within its limits"
		}
	case refuseDeadline:
		return fmt.Sprintf("no cloud offer is expected to finish by its deadline (the soonest in %s)", c.ExpectedDuration.Round(time.Minute))
	case refuseBudget:
		return fmt.Sprintf("team %s has $%.2f of its cloud budget left after $%.2f committed to runs and bursts not yet billed; the cheapest matching offer is expected to cost $%.2f",
			j.Team, team.BudgetLeft, committed, c.ExpectedCost)
	case refuseForever:
		return "spot interruptions are expected to keep it from ever finishing, and no other offer is within its limits"
	}
	return ""
}

// CloudOptions prices every offer in Options.Offers that j could rent now
// within its burst policy (pools, capacity types, price cap), its team's
// price cap and budget, and its deadline, cheapest expected cost to
// completion first: the cloud alternative a waiting job is shown, whether
// or not the plan sends it there. A job that has not enabled bursting is
// priced as if it had, with no limits of its own. Jobs pinned to nodes and
// CPU-only jobs have none.
func (se *Session) CloudOptions(j *gangway.QueueEntry) []gangway.BurstOffer {
	if len(j.Nodes) > 0 || len(se.opts.Offers) == 0 {
		return nil
	}
	team := se.team(j.Team)
	var out []gangway.BurstOffer
	for _, o := range se.opts.Offers {
		c, r := se.choose(j, o, team)
		if r != refuseNone || (!j.Deadline.IsZero() && se.view.now.Add(c.ExpectedDuration).After(j.Deadline)) {
			continue
		}
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b gangway.BurstOffer) int { return cmp.Compare(a.ExpectedCost, b.ExpectedCost) })
	return out
}

// team is the policy of j's team the burst decision checks: its
// Options.Teams entry, with what is left of its budget less what it has
// committed (committed).
func (se *Session) team(name string) TeamPolicy {
	t, ok := se.opts.Teams[name]
	if !ok {
		return TeamPolicy{BudgetLeft: NoBudget}
	}
	if t.BudgetLeft != NoBudget {
		t.BudgetLeft = max(t.BudgetLeft-se.committed(name), 0)
	}
	return t
}

// committed is what team has committed beyond the ledger its BudgetLeft
// comes from (which counts finished attempts: accounting.Budgets): this
// Place call's commitments and the expected cost of every burst the
// session has decided (commit: a burst leaves the queue for instances the
// snapshot does not hold, so the forecast's simulated cycles keep counting
// the bursts of the cycles before). Without it, every job of a team could
// rent at once as long as each alone fit the budget.
func (se *Session) committed(team string) float64 {
	if se.base == nil {
		se.base = se.commitments(nil) // priced before any Place call (CloudOptions)
	}
	return se.base[team] + se.burstSpent[team]
}

// commitments is, per team with a budget, what the snapshot and queue say
// it has committed: its runs on cloud nodes (each GPU at its node's price
// for the longer of the time it has run and its expected runtime, as the
// burst decision expects it; from the budget's Since where the run began
// before it), its jobs queued pinned to the cloud nodes
// launched for them (a burst whose instances are up: each node's GPUs for
// the job's expected runtime), and its bursts whose instances are still
// launching, which the snapshot does not hold (TeamPolicy.Launching).
func (se *Session) commitments(queue []gangway.QueueEntry) map[string]float64 {
	out := map[string]float64{}
	budgeted := func(team string) bool {
		t, ok := se.opts.Teams[team]
		return ok && t.BudgetLeft != NoBudget
	}
	for team, t := range se.opts.Teams {
		if budgeted(team) {
			out[team] += t.Launching
		}
	}
	cloud := func(id string) *Node {
		if k := se.nodeIndex(id); k >= 0 && se.view.nodes[k].CapacityType.Cloud() {
			return &se.view.nodes[k]
		}
		return nil
	}
	for i := range queue {
		j := &queue[i]
		if !budgeted(j.Team) {
			continue
		}
		for _, id := range j.Nodes {
			if n := cloud(id); n != nil && n.Owner == j.JobID {
				out[j.Team] += n.PricePerGPUHour * float64(len(n.GPUs)) * se.expected(j).Hours()
			}
		}
	}
	for i := range se.running {
		r := &se.running[i]
		if !budgeted(r.Team) {
			continue
		}
		start := r.At
		if since := se.opts.Teams[r.Team].Since; since.After(start) {
			start = since
		}
		end := r.At.Add(max(runtimeOf(r, se.opts.Predicted), se.view.now.Sub(r.At)))
		hours := max(end.Sub(start), 0).Hours()
		for _, m := range r.Members {
			if n := cloud(m.NodeID); n != nil {
				out[r.Team] += n.PricePerGPUHour * float64(len(m.GPUs)) * hours
			}
		}
	}
	return out
}

// commit charges a burst's expected cost (Burst.Expected) to its team for
// the rest of the session.
func (se *Session) commit(b Burst) {
	if se.burstSpent == nil {
		se.burstSpent = map[string]float64{}
	}
	se.burstSpent[b.Team] += b.Expected()
}

// Expected is what the burst is expected to cost: its first offer's
// expected cost, the offer it is sent to first.
func (b Burst) Expected() float64 {
	if len(b.Offers) == 0 {
		return 0
	}
	return b.Offers[0].ExpectedCost
}

// runtimeOf is how long a running allocation is expected to run in all:
// its predicted runtime (Options.Predicted, given), else its estimated
// runtime, else its max runtime; 0 when it has none.
func runtimeOf(r *gangway.Assignment, predicted map[gangway.JobID]time.Duration) time.Duration {
	if p, ok := predicted[r.JobID]; ok && p > 0 {
		return p
	}
	if r.Runtime > 0 {
		return r.Runtime
	}
	return r.MaxRuntime
}

// choose prices offer o for j, or says why it is ruled out (with what it
// priced so far).
func (se *Session) choose(j *gangway.QueueEntry, o gangway.Offer, team TeamPolicy) (gangway.BurstOffer, refusal) {
	b := j.Burst
	if o.GPUsPerInstance < j.GPUsPerReplica || j.GPUsPerReplica == 0 ||
		!allowed(b.Pools, o.Pool) || !allowed(b.CapacityTypes, o.CapacityType) || !allowed(j.GPUModels, o.GPUModel) {
		return gangway.BurstOffer{}, refuseMatch
	}
	c := gangway.BurstOffer{Offer: o, Count: j.Replicas}
	work := spotpolicy.Work{Replicas: j.Replicas, GPUsPerReplica: j.GPUsPerReplica, Remaining: se.expected(j),
		Checkpointable: j.Checkpointable, CheckpointInterval: j.CheckpointInterval, RestartOverhead: se.opts.RestartOverhead}
	price := o.PricePerGPUHourFor(j.GPUsPerReplica)
	if (b.MaxPricePerGPUHour > 0 && price > b.MaxPricePerGPUHour) ||
		(team.MaxPricePerGPUHour > 0 && price > team.MaxPricePerGPUHour) {
		return c, refusePrice
	}
	c.ExpectedCost, c.ExpectedDuration = spotpolicy.ExpectedCost(o, work), spotpolicy.ExpectedDuration(o, work)
	switch {
	case math.IsInf(c.ExpectedCost, 1):
		return c, refuseForever
	case team.BudgetLeft != NoBudget && c.ExpectedCost > team.BudgetLeft:
		return c, refuseBudget
	}
	return c, refuseNone
}

// expected is how long the burst decision expects j's run to last: its
// Options.Predicted runtime, unless it has a deadline or none is
// predicted; else its estimated runtime, else its max runtime.
func (se *Session) expected(j *gangway.QueueEntry) time.Duration {
	if p, ok := se.opts.Predicted[j.JobID]; ok && p > 0 && j.Deadline.IsZero() {
		return p
	}
	return declaredRuntime(j)
}

// onPremETA estimates how long j waits on-prem: until enough of the
// running jobs that hold GPUs it may use have ended to free its GPUs and
// the GPUs the blocked jobs before it in the queue (ahead) wait for,
// which take what frees first and free it again when they end, or
// until its reservation starts if that is sooner. A running job ends at
// its start plus its Options.Predicted runtime, else its estimated
// runtime, else its max runtime; for a job with a deadline, and without
// predictions, the reservation's start (from the declared runtimes) is
// the estimate. A job being preempted or defragmented for is about to
// start.
func (se *Session) onPremETA(j *gangway.QueueEntry, u Unplaced, rs []Reservation, ahead queuedAhead) time.Duration {
	switch {
	case !u.Reason.Retry():
		return never
	case u.Reason == ReasonPreempting || u.Reason == ReasonDefragmenting:
		return 0
	}
	now := se.view.now
	predicted := se.opts.Predicted
	if !j.Deadline.IsZero() {
		predicted = nil
	} else if at, ok := se.opts.ExpectedStarts[j.JobID]; ok {
		return max(at.Sub(now), 0)
	}
	reserved := never
	for _, r := range rs {
		if r.JobID == j.JobID {
			reserved = max(r.Start.Sub(now), 0)
		}
	}
	if reserved != never && predicted == nil {
		return reserved
	}
	eta := se.releaseETA(j, ahead, predicted)
	if reserved != never && (eta == never || reserved < eta) {
		return reserved
	}
	return eta
}

// queuedAhead sums up the blocked jobs ahead of a job in the queue: the
// GPUs they wait for and the GPU-seconds they will hold them for, by
// declared runtimes (their estimated, else max runtimes) and by expected
// ones (Session.expected). Seconds in float64: GPU-nanoseconds of a deep
// queue overflow an int64.
type queuedAhead struct {
	gpus               int
	declared, expected float64
}

// add counts j among the jobs ahead (sign 1), or takes it out again (-1).
func (a *queuedAhead) add(se *Session, j *gangway.QueueEntry, sign int) {
	g := sign * j.Replicas * j.GPUsPerReplica
	a.gpus += g
	a.declared += float64(g) * declaredRuntime(j).Seconds()
	a.expected += float64(g) * se.expected(j).Seconds()
}

// hold is how long the jobs ahead hold each GPU they take, on average.
func (a queuedAhead) hold(predicted bool) time.Duration {
	if a.gpus <= 0 {
		return 0
	}
	sum := a.declared
	if predicted {
		sum = a.expected
	}
	return time.Duration(sum / float64(a.gpus) * float64(time.Second))
}

// declaredRuntime is j's estimated runtime, else its max runtime.
func declaredRuntime(j *gangway.QueueEntry) time.Duration {
	if j.Runtime > 0 {
		return j.Runtime
	}
	return j.MaxRuntime
}

// releaseETA is how long until j's GPUs are free (onPremETA): the running
// jobs end by their predicted, else declared runtimes, and the GPUs they
// free go first to the jobs ahead, which free them again after holding
// them as long as those jobs are expected to run. never when j needs more
// GPUs than are free or held by running jobs on the nodes it may use, or
// when the jobs ahead would take GPUs and never give them back.
func (se *Session) releaseETA(j *gangway.QueueEntry, ahead queuedAhead, predicted map[gangway.JobID]time.Duration) time.Duration {
	now := se.view.now
	own := j.Replicas * j.GPUsPerReplica
	free := 0
	v := se.view
	for i := range v.nodes {
		n := &v.nodes[i]
		if !n.Schedulable || !se.mayUse(j, i) {
			continue
		}
		for _, f := range v.free[i] {
			if f == Whole {
				free++
			}
		}
	}
	var rels releases
	total := free
	for _, r := range se.running {
		runtime := runtimeOf(&r, predicted)
		if runtime <= 0 {
			continue
		}
		g := 0
		for _, m := range r.Members {
			if i := se.nodeIndex(m.NodeID); i >= 0 && v.nodes[i].Schedulable && se.mayUse(j, i) {
				g += len(m.GPUs)
			}
		}
		if g > 0 {
			rels = append(rels, release{r.At.Add(runtime), g})
			total += g
		}
	}
	if total < own {
		return never
	}
	// pending is what the jobs ahead still wait for: they take free GPUs
	// first, and give them back hold later.
	pending, hold := ahead.gpus, ahead.hold(predicted != nil)
	take := func(at time.Time) {
		n := min(free, pending)
		if n <= 0 {
			return
		}
		free, pending = free-n, pending-n
		if hold > 0 {
			heap.Push(&rels, release{at.Add(hold), n})
		}
	}
	heap.Init(&rels)
	if take(now); pending == 0 && free >= own {
		return 0 // fragmentation, not capacity: expect a spot soon
	}
	for rels.Len() > 0 {
		r := heap.Pop(&rels).(release)
		free += r.gpus
		if take(r.at); pending == 0 && free >= own {
			return max(r.at.Sub(now), 0)
		}
	}
	return never
}

// release is when some GPUs j may use free (releaseETA).
type release struct {
	at   time.Time
	gpus int
}

// releases is a min-heap of releases by time.
type releases []release

func (h releases) Len() int           { return len(h) }
func (h releases) Less(a, b int) bool { return h[a].at.Before(h[b].at) }
func (h releases) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *releases) Push(x any)        { *h = append(*h, x.(release)) }
func (h *releases) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
