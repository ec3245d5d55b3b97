package placement

import (
	"cmp"
	"slices"

	"github.com/gangwayhq/gangway"
)

// Fairness weighs teams against each other within a priority class.
type Fairness struct {
	// TeamWeights scales each team's fair share (default 1): a team of
	// weight 2 may hold twice the dominant share of a team of weight 1
	// before it yields.
	TeamWeights map[string]float64
}

// usage is what a team holds, per resource.
type usage struct {
	gpuMilli, cpu, mem int64
}

// orderer yields queued jobs in the order they are tried: priority classes
// highest first; within a class the team with the lowest weighted dominant
// resource share goes next (dominant resource fairness, recomputed after
// every placement); within a team, oldest first. A job that does not fit
// does not block its team's later jobs (they may backfill).
type orderer struct {
	levels [][]*teamQueue // by priority, highest first
	level  int
	total  usage // fleet capacity
	held   map[string]*usage
	fair   Fairness
}

type teamQueue struct {
	team string
	jobs []*gangway.QueueEntry
}

func newOrderer(jobs []*gangway.QueueEntry, s *Session) *orderer {
	o := &orderer{held: map[string]*usage{}, fair: s.opts.Fairness}
	for i := range s.view.nodes {
		n := &s.view.nodes[i]
		o.total.gpuMilli += int64(len(n.GPUs)) * Whole
		o.total.cpu += n.CPUMilli
		o.total.mem += n.MemMiB
	}
	for i := range s.running {
		r := &s.running[i]
		o.charge(r.Team, runningUsage(r))
	}
	slices.SortStableFunc(jobs, func(a, b *gangway.QueueEntry) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.SubmittedAt.Compare(b.SubmittedAt), cmp.Compare(a.JobID, b.JobID))
	})
	for k := 0; k < len(jobs); {
		e := k
		for e < len(jobs) && jobs[e].Priority == jobs[k].Priority {
			e++
		}
		var teams []*teamQueue
		for _, j := range jobs[k:e] {
			at := slices.IndexFunc(teams, func(t *teamQueue) bool { return t.team == j.Team })
			if at < 0 {
				teams = append(teams, &teamQueue{team: j.Team})
				at = len(teams) - 1
			}
			teams[at].jobs = append(teams[at].jobs, j)
		}
		o.levels = append(o.levels, teams)
		k = e
	}
	return o
}

func runningUsage(r *gangway.Assignment) usage {
	milli := int64(meteredOf(r))
	n := int64(len(r.Members))
	return usage{gpuMilli: int64(r.GPUCount()) * milli, cpu: r.CPUMilli * n, mem: r.MemMiB * n}
}

func jobUsage(j *gangway.QueueEntry) usage {
	n := int64(j.Replicas)
	model := ""
	if len(j.GPUModels) == 1 {
		model = j.GPUModels[0]
	}
	return usage{gpuMilli: j.MeteredMilli(model), cpu: j.CPUMilli * n, mem: j.MemMiB * n}
}

func (o *orderer) charge(team string, u usage) {
	h := o.held[team]
	if h == nil {
		h = &usage{}
		o.held[team] = h
	}
	h.gpuMilli += u.gpuMilli
	h.cpu += u.cpu
	h.mem += u.mem
}

// share is the team's weighted dominant share.
func (o *orderer) share(team string) float64 {
	h := o.held[team]
	if h == nil {
		return 0
	}
	d := max(ratio(h.gpuMilli, o.total.gpuMilli), ratio(h.cpu, o.total.cpu), ratio(h.mem, o.total.mem))
	w := o.fair.TeamWeights[team]
	if w <= 0 {
		w = 1
	}
	return d / w
}

func ratio(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// next pops the next job to try.
func (o *orderer) next() (*gangway.QueueEntry, bool) {
	for o.level < len(o.levels) {
		teams := o.levels[o.level]
		var pick *teamQueue
		for _, t := range teams {
			if len(t.jobs) == 0 {
				continue
			}
			if pick == nil {
				pick = t
				continue
			}
			sp, st := o.share(pick.team), o.share(t.team)
			if st < sp || (st == sp && t.jobs[0].SubmittedAt.Before(pick.jobs[0].SubmittedAt)) {
				pick = t
			}
		}
		if pick == nil {
			o.level++
			continue
		}
		j := pick.jobs[0]
		pick.jobs = pick.jobs[1:]
		return j, true
	}
	return nil, false
}
