package placement

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gangwayhq/gangway"
)

// explain says why j did not fit, with numbers, distinguishing what may
// resolve by waiting from what never will.
func (se *Session) explain(j *gangway.QueueEntry) Unplaced {
	v := se.view
	u := Unplaced{JobID: j.JobID}
	shape := describeShape(j)

	var fleetModels []string
	matching, everReplicas := 0, 0
	for i := range v.nodes {
		n := &v.nodes[i]
		if n.Model != "" && !slices.Contains(fleetModels, n.Model) {
			fleetModels = append(fleetModels, n.Model)
		}
		if !mayUse(j, n) {
			continue
		}
		matching++
		everReplicas += replicasByCapacity(n, j)
	}
	slices.Sort(fleetModels)
	switch {
	case matching == 0:
		u.Reason = ReasonModelUnavailable
		u.Detail = fmt.Sprintf("%s: no node has %s in %s; the fleet has %s", shape,
			orAny(j.GPUModels, "any model"), orAny(j.Pools, "any pool"), strings.Join(fleetModels, ", "))
		return u
	case everReplicas < j.Replicas:
		u.Reason = ReasonNeverFits
		u.Detail = fmt.Sprintf("%s: the fleet holds at most %d such replicas (%d matching nodes)", shape, everReplicas, matching)
		return u
	}
	if j.Topology.Required && j.Topology.Level != gangway.LevelNone {
		largestEver := se.largestGroup(j.Topology.Level, j.GPUModels)
		need := j.Replicas * j.GPUsPerReplica
		if j.Share() {
			need = (j.Replicas*j.GPUMilli + Whole - 1) / Whole // shares pack onto fewer GPUs
		}
		if largestEver < need {
			u.Reason = ReasonNeverFits
			u.Detail = fmt.Sprintf("%s: needs %d GPUs in one %s domain; the largest in the fleet has %d",
				shape, need, j.Topology.Level, largestEver)
			return u
		}
	}

	if se.quota.hasQuotas() {
		why, whyNoQuota := "", ""
		admitted := false
		for _, m := range fleetModels {
			if !allowed(j.GPUModels, m) {
				continue
			}
			ok, w := se.quota.admits(j.Team, m, j.GPUMilliTotal())
			admitted = admitted || ok
			// Say why the team's own quota is used up before naming the
			// models it has none of.
			if _, has := se.quota.find(j.Team, m); has && why == "" {
				why = w
			} else if !has && whyNoQuota == "" {
				whyNoQuota = w
			}
		}
		if why == "" {
			why = whyNoQuota
		}
		if !admitted {
			u.Reason, u.Detail = ReasonQuota, fmt.Sprintf("%s: %s", shape, why)
			return u
		}
	}

	// Not now: count what is free where the job may go.
	freeMilli, freeWhole, largestNode, reservedFree := 0, 0, 0, 0
	end := v.jobEnd(j)
	for i := range v.nodes {
		n := &v.nodes[i]
		if !n.Schedulable || !mayUse(j, n) {
			continue
		}
		nodeWhole := 0
		for gi, f := range v.free[i] {
			freeMilli += f
			if f == Whole {
				if v.usable(i, gi, end) {
					nodeWhole++
				} else {
					reservedFree++
				}
			}
		}
		freeWhole += nodeWhole
		largestNode = max(largestNode, nodeWhole)
	}
	need := j.Replicas * j.GPUsPerReplica
	switch {
	case j.Share() || j.GPUsPerReplica == 0:
		u.Reason = ReasonInsufficientGPUs
		u.Detail = fmt.Sprintf("%s: %d milli-GPU free on matching nodes, none with room for the task's GPU share, CPU and memory", shape, freeMilli)
	case freeWhole+reservedFree >= need && freeWhole < need:
		u.Reason = ReasonReserved
		u.Detail = fmt.Sprintf("%s: %d free GPUs are reserved for a blocked larger job that starts before this one would end", shape, reservedFree)
	case freeWhole >= need && largestNode < j.GPUsPerReplica:
		u.Reason = ReasonFragmented
		u.Detail = fmt.Sprintf("%s: %d GPUs free, but no node has %d free; largest has %d", shape, freeWhole, j.GPUsPerReplica, largestNode)
	case freeWhole >= need && j.Topology.Required:
		u.Reason = ReasonFragmented
		u.Detail = fmt.Sprintf("%s: %d GPUs free, but no %s domain has %d free together", shape, freeWhole, j.Topology.Level, need)
	case freeWhole >= need:
		u.Reason = ReasonInsufficientGPUs
		u.Detail = fmt.Sprintf("%s: %d GPUs free, but not with the CPU and memory each replica needs (%dm CPU, %d MiB)", shape, freeWhole, j.CPUMilli, j.MemMiB)
	default:
		u.Reason = ReasonInsufficientGPUs
		u.Detail = fmt.Sprintf("%s: needs %d GPUs, %d free on matching nodes (largest free block %d on one node)", shape, need, freeWhole, largestNode)
	}
	return u
}

// replicasByCapacity is how many replicas of j node n could hold empty.
func replicasByCapacity(n *Node, j *gangway.QueueEntry) int {
	byCPU, byMem := perResource(n.CPUMilli, j.CPUMilli), perResource(n.MemMiB, j.MemMiB)
	byGPU := perResource(0, 0)
	switch {
	case j.Share():
		byGPU = len(n.GPUs) * (Whole / j.GPUMilli)
	case j.GPUsPerReplica > 0:
		byGPU = len(n.GPUs) / j.GPUsPerReplica
	}
	return min(byGPU, byCPU, byMem)
}

// perResource is how many replicas fit in free, or many when none is asked.
func perResource(free, per int64) int {
	if per <= 0 {
		return 1 << 30
	}
	return int(free / per)
}

func describeShape(j *gangway.QueueEntry) string {
	var s string
	switch {
	case j.GPUsPerReplica == 0:
		s = fmt.Sprintf("%d CPU-only replicas", j.Replicas)
	case j.Share():
		s = fmt.Sprintf("%d × %dm GPU share", j.Replicas, j.GPUMilli)
	default:
		s = fmt.Sprintf("%d × %d GPUs", j.Replicas, j.GPUsPerReplica)
	}
	if len(j.GPUModels) > 0 {
		s += " (" + strings.Join(j.GPUModels, "|") + ")"
	}
	return s
}

func orAny(list []string, none string) string {
	if len(list) == 0 {
		return none
	}
	return strings.Join(list, "|")
}
