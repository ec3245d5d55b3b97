package placement

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gangwayhq/gangway"
)

// WorkloadFromJobs is the typical workload of a set of jobs: one class per
// distinct replica shape (GPUs, share, CPU, memory, allowed models),
// weighted by how many replicas have it. Fragmentation is measured against
// it, as FGD measures it against the trace's task mix. Jobs on MIG devices
// are left out: they never use the whole GPUs fragmentation is about.
func WorkloadFromJobs(jobs []gangway.QueueEntry) []WorkloadClass {
	type key struct {
		gpus, milli int
		cpu, mem    int64
		models      string
	}
	count := map[key]float64{}
	models := map[key][]string{}
	var order []key
	total := 0.0
	for i := range jobs {
		j := &jobs[i]
		if j.MIG() {
			continue
		}
		k := key{gpus: j.GPUsPerReplica, milli: j.MilliEachGPU(), cpu: j.CPUMilli, mem: j.MemMiB}
		if j.GPUsPerReplica == 0 {
			k.milli = 0
		}
		if len(j.GPUModels) > 0 {
			m := slices.Clone(j.GPUModels)
			slices.Sort(m)
			k.models = strings.Join(m, "|")
			models[k] = m
		}
		if _, seen := count[k]; !seen {
			order = append(order, k)
		}
		count[k] += float64(max(j.Replicas, 1))
		total += float64(max(j.Replicas, 1))
	}
	out := make([]WorkloadClass, 0, len(order))
	for _, k := range order {
		out = append(out, WorkloadClass{GPUs: k.gpus, Milli: k.milli, CPUMilli: k.cpu, MemMiB: k.mem,
			Models: models[k], Weight: count[k] / total})
	}
	return out
}

func (w WorkloadClass) String() string {
	return fmt.Sprintf("%dx%dm cpu=%dm mem=%dMiB models=%v w=%.3f", w.GPUs, w.Milli, w.CPUMilli, w.MemMiB, w.Models, w.Weight)
}
