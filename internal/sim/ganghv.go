package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// GangHeavyClass is one kind of job of the gang-heavy mix.
type GangHeavyClass struct {
	Share             float64 // of the jobs
	Replicas, GPUs    int     // GPUs per replica, each replica on one node
	Preemptible       bool
	MeanDuration      time.Duration // exponential, capped at 4× the mean
	CPUPerGPU, MemMiB int64         // per GPU
}

// GangHeavyMix is the synthetic gang-heavy workload (GangHeavyJobs):
// small jobs that may be preempted and checkpoint — the jobs planned
// defragmentation may move — and large ones, 8 GPUs on one node or gangs
// of 2 and 4 such replicas, that carry most of the GPU demand and wait
// when the free GPUs are scattered. All run at one priority, so
// preemption by priority plays no part.
var GangHeavyMix = []GangHeavyClass{
	{Share: 0.45, Replicas: 1, GPUs: 1, Preemptible: true, MeanDuration: 2 * time.Hour, CPUPerGPU: 4000, MemMiB: 16 << 10},
	{Share: 0.15, Replicas: 1, GPUs: 2, Preemptible: true, MeanDuration: 2 * time.Hour, CPUPerGPU: 4000, MemMiB: 16 << 10},
	{Share: 0.10, Replicas: 1, GPUs: 4, Preemptible: true, MeanDuration: 2 * time.Hour, CPUPerGPU: 4000, MemMiB: 16 << 10},
	{Share: 0.15, Replicas: 1, GPUs: 8, MeanDuration: 4 * time.Hour, CPUPerGPU: 4000, MemMiB: 16 << 10},
	{Share: 0.10, Replicas: 2, GPUs: 8, MeanDuration: 4 * time.Hour, CPUPerGPU: 4000, MemMiB: 16 << 10},
	{Share: 0.05, Replicas: 4, GPUs: 8, MeanDuration: 4 * time.Hour, CPUPerGPU: 4000, MemMiB: 16 << 10},
}

// GangHeavyJobs draws n jobs of GangHeavyMix, seeded, for a fleet of
// nodes: Poisson arrivals at the rate that offers the fleet its GPU
// capacity (offered load 1: as many GPU-seconds arrive per second as it
// has GPUs; TraceConfig.Speedup raises it); a class's GPUs per replica are
// capped at the fleet's largest node. Job IDs are "gh-<n>", in four teams.
func GangHeavyJobs(n int, nodes []placement.Node, seed uint64) ([]TraceJob, error) {
	capacity := float64(GPUCapacityMilli(nodes)) / placement.Whole
	largest := 0
	for i := range nodes {
		largest = max(largest, len(nodes[i].GPUs))
	}
	if n <= 0 || capacity == 0 {
		return nil, fmt.Errorf("gang-heavy: want 1 or more jobs on a fleet with GPUs, got %d jobs, %.0f GPUs", n, capacity)
	}
	var work, total float64 // mean GPU-seconds a job brings
	for _, c := range GangHeavyMix {
		total += c.Share
		work += c.Share * float64(c.Replicas*min(c.GPUs, largest)) * c.MeanDuration.Seconds()
	}
	meanGap := work / total / capacity             // seconds
	rnd := rand.New(rand.NewPCG(seed, 0x67616e67)) // "gang"
	teams := []string{"nlp", "vision", "speech", "rec"}
	jobs := make([]TraceJob, n)
	at := 0.0
	for k := range jobs {
		x, c := rnd.Float64()*total, GangHeavyMix[len(GangHeavyMix)-1]
		for _, cl := range GangHeavyMix {
			if x < cl.Share {
				c = cl
				break
			}
			x -= cl.Share
		}
		at += rnd.ExpFloat64() * meanGap
		gpus := min(c.GPUs, largest)
		d := math.Min(rnd.ExpFloat64(), 4) * c.MeanDuration.Seconds()
		jobs[k] = TraceJob{
			Job: gangway.QueueEntry{JobID: fmt.Sprintf("gh-%d", k), Team: teams[rnd.IntN(len(teams))], Priority: 100,
				Replicas: c.Replicas, GPUsPerReplica: gpus, Preemptible: c.Preemptible,
				CPUMilli: c.CPUPerGPU * int64(gpus), MemMiB: c.MemMiB * int64(gpus)},
			Submit:   time.Duration(at * float64(time.Second)).Round(time.Second),
			Duration: max(time.Duration(d*float64(time.Second)).Round(time.Second), time.Minute),
		}
	}
	return jobs, nil
}
