package placement

import (
	"fmt"
	"strings"

	"github.com/gangwayhq/gangway"
)

// explain says why j did not fit, with numbers, distinguishing what may
// resolve by waiting from what never will. It reads the census of the
// filter chain (filter.go) — the same filters that decided j does not fit
// — in the order a person would check: does any node match at all, could
// the fleet ever hold the job, does its team's quota allow it, and what is
// free where it may go now.
func (se *Session) explain(j *gangway.QueueEntry) Unplaced {
	c := se.count(j)
	u := Unplaced{JobID: j.JobID}
	shape := describeShape(j)
	switch {
	case c.matching == 0:
		u.Reason = ReasonModelUnavailable
		u.Detail = fmt.Sprintf("%s: no node has %s in %s; the fleet has %s", shape,
			orAny(j.GPUModels, "any model"), orAny(j.Pools, "any pool"), strings.Join(c.models, ", "))
		return u
	case j.MIGProfile != "" && c.everReplicas < j.Replicas:
		u.Reason = ReasonNeverFits
		u.Detail = fmt.Sprintf("%s: the %d matching nodes have MIG devices of profile %s for at most %d such replicas", shape, c.matching, j.MIGProfile, c.everReplicas)
		return u
	case c.everReplicas < j.Replicas:
		u.Reason = ReasonNeverFits
		u.Detail = fmt.Sprintf("%s: the fleet holds at most %d such %s (%d matching %s)", shape,
			c.everReplicas, gangway.Plural(c.everReplicas, "replica", "replicas"), c.matching, gangway.Plural(c.matching, "node", "nodes"))
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
	if se.quota.hasQuotas() && c.rejected[fQuota] == c.matching {
		u.Reason, u.Detail = ReasonQuota, fmt.Sprintf("%s: %s", shape, se.quotaWhy(j, c.models))
		return u
	}

	// Not now: what is free where the job may go.
	need := j.Replicas * j.GPUsPerReplica
	switch {
	case j.MIGProfile != "":
		u.Reason = ReasonInsufficientGPUs
		u.Detail = fmt.Sprintf("%s: needs %d MIG devices of profile %s, %d free on matching nodes (most on one node %d; %s)",
			shape, need, j.MIGProfile, c.freeWhole, c.largestNode, c.short())
		if c.reservedFree > 0 && c.freeWhole+c.reservedFree >= need {
			u.Reason = ReasonReserved
			u.Detail = fmt.Sprintf("%s: %d free MIG devices of profile %s are reserved for a blocked job that starts before this one would end", shape, c.reservedFree, j.MIGProfile)
		}
	case j.Share() || j.GPUsPerReplica == 0:
		u.Reason = ReasonInsufficientGPUs
		u.Detail = fmt.Sprintf("%s: %d milli-GPU free on matching nodes, none with room for the task's GPU share, CPU and memory (%s)",
			shape, c.freeMilli, c.short())
	case c.freeWhole+c.reservedFree >= need && c.freeWhole < need:
		u.Reason = ReasonReserved
		u.Detail = fmt.Sprintf("%s: %d free GPUs are reserved for a blocked larger job that starts before this one would end", shape, c.reservedFree)
	case c.freeWhole >= need && c.largestNode < j.GPUsPerReplica:
		u.Reason = ReasonFragmented
		u.Detail = fmt.Sprintf("%s: %d GPUs free, but no node has %d free; largest has %d", shape, c.freeWhole, j.GPUsPerReplica, c.largestNode)
	case c.freeWhole >= need && j.Topology.Required:
		u.Reason = ReasonFragmented
		u.Detail = fmt.Sprintf("%s: %d GPUs free, but no %s domain has %d free together", shape, c.freeWhole, j.Topology.Level, need)
	case c.freeWhole >= need:
		u.Reason = ReasonInsufficientGPUs
		u.Detail = fmt.Sprintf("%s: %d GPUs free, but not with the CPU and memory each replica needs (%dm CPU, %d MiB; %s)",
			shape, c.freeWhole, j.CPUMilli, j.MemMiB, c.short())
	default:
		u.Reason = ReasonInsufficientGPUs
		u.Detail = fmt.Sprintf("%s: needs %d GPUs, %d free on matching nodes (largest free block %d on one node%s)",
			shape, need, c.freeWhole, c.largestNode, c.unschedulable())
	}
	return u
}

// unschedulable counts the matching nodes that take no work now, whose
// GPUs the free counts leave out: "; 1 more matching node is cordoned or
// lost", or nothing.
func (c *census) unschedulable() string {
	n := c.rejected[fSchedulable]
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d more matching %s cordoned or lost", n, gangway.Plural(n, "node is", "nodes are"))
}

// short says how many matching nodes lack what one replica needs, by
// filter, as the census counted them.
func (c *census) short() string {
	return fmt.Sprintf("of %d matching nodes, %d lack the free GPUs, %d the CPU, %d the memory",
		c.matching, c.rejected[fGPUs], c.rejected[fCPU], c.rejected[fMemory])
}

// quotaWhy is the quota book's sentence for j: why the team's own quota is
// used up, before naming the models it has none of.
func (se *Session) quotaWhy(j *gangway.QueueEntry, models []string) string {
	why, whyNoQuota := "", ""
	for _, m := range models {
		if !allowed(j.GPUModels, m) {
			continue
		}
		ok, w := se.quota.admits(j.Team, m, j.MeteredMilli(m))
		if ok {
			continue
		}
		if _, has := se.quota.find(j.Team, m); has && why == "" {
			why = w
		} else if !has && whyNoQuota == "" {
			whyNoQuota = w
		}
	}
	if why == "" {
		why = whyNoQuota
	}
	return why
}

// replicasByCapacity is how many replicas of j node n could hold empty:
// a MIG job on its profile's MIG devices, the others on whole GPUs.
func replicasByCapacity(n *Node, j *gangway.QueueEntry) int {
	byCPU, byMem := perResource(n.CPUMilli, j.CPUMilli), perResource(n.MemMiB, j.MemMiB)
	byGPU := perResource(0, 0)
	switch {
	case j.GPUsPerReplica == 0:
	case j.MIGProfile != "":
		byGPU = n.gpusOf(j.MIGProfile) / j.GPUsPerReplica
	case j.Share():
		byGPU = n.gpusOf("") * (Whole / j.GPUMilli)
	default:
		byGPU = n.gpusOf("") / j.GPUsPerReplica
	}
	return min(byGPU, byCPU, byMem)
}

// gpusOf is how many of n's GPUs are MIG devices of profile, or whole GPUs
// for "".
func (n *Node) gpusOf(profile string) int {
	k := 0
	for g := range n.GPUs {
		if n.GPUs[g].MIG == profile {
			k++
		}
	}
	return k
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
		s = fmt.Sprintf("%d CPU-only %s", j.Replicas, gangway.Plural(j.Replicas, "replica", "replicas"))
	case j.MIGProfile != "" && j.GPUsPerReplica == 1:
		s = fmt.Sprintf("%d × MIG %s", j.Replicas, j.MIGProfile)
	case j.MIGProfile != "":
		s = fmt.Sprintf("%d × %d MIG %s", j.Replicas, j.GPUsPerReplica, j.MIGProfile)
	case j.Share():
		s = fmt.Sprintf("%d × %dm GPU share", j.Replicas, j.GPUMilli)
	default:
		s = fmt.Sprintf("%d × %d %s", j.Replicas, j.GPUsPerReplica, gangway.Plural(j.GPUsPerReplica, "GPU", "GPUs"))
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
