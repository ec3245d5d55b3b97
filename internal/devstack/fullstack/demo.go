package fullstack

import (
	"context"
	"fmt"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
)

// demoJob is one job of the demo workload.
type demoJob struct {
	team             string
	replicas, gpus   int
	steps, instances int
	burst            bool
}

// demoWorkload mixes the shapes a shared cluster sees: many small jobs,
// some 4-GPU jobs, 2 × 8 gangs that need two whole nodes at once, and
// whole-node jobs (one a gang) allowed to burst to the cloud: together more
// than the default on-prem fleet can start at once.
var demoWorkload = []demoJob{
	{team: "vision", replicas: 1, gpus: 1, steps: 40, instances: 8},
	{team: "nlp", replicas: 1, gpus: 4, steps: 60, instances: 4},
	{team: "speech", replicas: 1, gpus: 2, steps: 50, instances: 4},
	{team: "nlp", replicas: 2, gpus: 8, steps: 80, instances: 2},
	{team: "research", replicas: 1, gpus: 8, steps: 120, instances: 3, burst: true},
	{team: "research", replicas: 2, gpus: 8, steps: 100, instances: 1, burst: true},
}

// DemoSpecs is the demo workload of `gangway dev`, every job running self
// demo-train at stepTime per step; suffix makes the names of one run
// unique.
func DemoSpecs(self string, stepTime time.Duration, suffix string) []gangway.JobSpec {
	var specs []gangway.JobSpec
	for _, d := range demoWorkload {
		for i := range d.instances {
			s := gangway.JobSpec{
				Name:    fmt.Sprintf("%s-%dx%d-%d-%s", d.team, d.replicas, d.gpus, i, suffix),
				Team:    d.team,
				Project: "demo",
				Command: []string{self, "demo-train"},
				Args:    []string{"--steps", fmt.Sprint(d.steps + 10*i), "--step-time", stepTime.String()},
				Gang:    gangway.Gang{Replicas: d.replicas, GPUsPerReplica: d.gpus},
				// A realistic bound lets the scheduler plan reservations
				// for the gangs around the small jobs.
				MaxRuntime: gangway.Duration{Duration: 2 * time.Minute},
				Burst:      gangway.Burst{Enabled: d.burst},
			}
			s.Default()
			specs = append(specs, s)
		}
	}
	return specs
}

// GPUUse counts the view's GPUs held by jobs and in all, and the nodes
// that belong to cloud instances (they have an owning job); zeros when the
// view cannot be read.
func GPUUse(ctx context.Context, v *capacity.View) (busy, total, cloudNodes int) {
	nodes, err := v.Nodes(ctx)
	if err != nil {
		return 0, 0, 0
	}
	for _, n := range nodes {
		busy += n.HeldGPUs()
		total += len(n.Node.GPUs)
		if n.Node.Owner != "" {
			cloudNodes++
		}
	}
	return busy, total, cloudNodes
}
