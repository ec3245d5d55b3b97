package placement

import (
	"slices"
	"strings"

	"github.com/gangwayhq/gangway"
)

// MayStart reports whether a Place call now could start any job of queue:
// a necessary condition, far cheaper than Place. A job may start only if
// the nodes it may use have, for all its replicas together, enough
// entirely free GPUs (a share: room on one GPU; a MIG job: free devices of
// its profile), CPU and memory, on nodes
// where its team's quota admits it (a job its quota stops does not look for
// victims). With preemption on, what preemptible jobs it could stop hold
// counts as free. False means Place would start nothing and preempt nobody; the
// reservations it would make matter only until the next call, which makes
// its own. The start-time forecast (placement/forecast) skips the Place
// calls of instants where nothing can start.
func (se *Session) MayStart(queue []gangway.QueueEntry) bool {
	v := se.view
	var held heldByPreemptible
	if se.opts.Preempt {
		held = se.preemptibleHeld()
	}
	owned := slices.ContainsFunc(v.nodes, func(n Node) bool { return n.Owner != "" })
	seen := make(map[mayStartKey]bool, 16)
	for i := range queue {
		j := &queue[i]
		k := mayStartKey{replicas: j.Replicas, gpus: j.GPUsPerReplica, milli: j.GPUMilli, mig: j.MIGProfile, cpu: j.CPUMilli, mem: j.MemMiB,
			models: strings.Join(j.GPUModels, "|"), pools: strings.Join(j.Pools, "|"), team: j.Team,
			nodes: strings.Join(j.Nodes, "|"), owner: j.JobID}
		if !owned {
			k.owner = "" // no node is owned by a job: the ID cannot matter
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		if se.mayFit(v, j, held) {
			return true
		}
	}
	return false
}

type mayStartKey struct {
	replicas, gpus, milli int
	mig                   string
	cpu, mem              int64
	models, pools, team   string
	nodes, owner          string
}

// heldByPreemptible is, per node, what preemptible running jobs old
// enough to be victims hold.
type heldByPreemptible [][]heldBy

type heldBy struct {
	gpus     []int
	cpu, mem int64
	priority int
}

func (se *Session) preemptibleHeld() heldByPreemptible {
	h := make(heldByPreemptible, len(se.view.nodes))
	for k := range se.running {
		r := &se.running[k]
		if !r.Preemptible || se.victims[r.JobID] || se.view.now.Sub(r.At) < se.opts.MinRuntime {
			continue
		}
		for _, m := range r.Members {
			if i := se.nodeIndex(m.NodeID); i >= 0 {
				h[i] = append(h[i], heldBy{gpus: m.GPUs, cpu: r.CPUMilli, mem: r.MemMiB, priority: r.Priority})
			}
		}
	}
	return h
}

// freeable is what j could have on node i by preempting: the holders of
// lower priority, or any holder when quotas are set (a team may reclaim
// the quota it lent whatever the borrower's priority).
func (h heldByPreemptible) freeable(se *Session, j *gangway.QueueEntry, i int) (gpus []int, cpu, mem int64) {
	if h == nil {
		return nil, 0, 0
	}
	for _, e := range h[i] {
		if e.priority < j.Priority || se.quota.hasQuotas() {
			gpus = append(gpus, e.gpus...)
			cpu += e.cpu
			mem += e.mem
		}
	}
	return gpus, cpu, mem
}

// mayFit is MayStart for one job.
func (se *Session) mayFit(v *View, j *gangway.QueueEntry, held heldByPreemptible) bool {
	slots := 0
	for i := range v.nodes {
		n := &v.nodes[i]
		if !n.Schedulable || !se.mayUse(j, i) {
			continue
		}
		if se.quota.hasQuotas() {
			if ok, _ := se.quota.admits(j.Team, n.Model, j.MeteredMilli(n.Model)); !ok {
				continue
			}
		}
		extra, cpu, mem := held.freeable(se, j, i)
		cpu, mem = cpu+v.cpu[i], mem+v.mem[i]
		per := j.Replicas
		switch {
		case j.GPUsPerReplica == 0:
		case j.MIGProfile != "":
			free := v.FreeMIG(i, j.MIGProfile)
			for _, g := range extra {
				if v.isMIG(i, g) && v.nodes[i].GPUs[g].MIG == j.MIGProfile && v.mig[i][g] != migFree {
					free++
				}
			}
			per = free / j.GPUsPerReplica
		case j.Share():
			per = 0
			for g, f := range v.free[i] {
				if slices.Contains(extra, g) {
					f = Whole
				}
				per += f / j.GPUMilli
			}
		default:
			whole := v.whole[i]
			for g, f := range v.free[i] {
				if f < Whole && slices.Contains(extra, g) {
					whole++
				}
			}
			per = whole / j.GPUsPerReplica
		}
		if j.CPUMilli > 0 {
			per = min(per, int(cpu/j.CPUMilli))
		}
		if j.MemMiB > 0 {
			per = min(per, int(mem/j.MemMiB))
		}
		if slots += per; slots >= j.Replicas {
			return true
		}
	}
	return false
}
