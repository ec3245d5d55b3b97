package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/config"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/internal/sim"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

// The fake cloud of `gangway dev`.
const (
	// devBurstAfter is short so that the demo's short jobs burst: the
	// default (10m) is for real fleets.
	devBurstAfter = 15 * time.Second
	// devOnPremPrice is the amortized price of the simulated H100s when the
	// config gives none (an 8 × H100 server over four years, with power).
	devOnPremPrice = 2.5
	// devSpotTrace is the trace the spot pool follows when present and
	// --spot-trace names none, relative to the repository root.
	devSpotTrace = "../shared/traces/spot/preemption/1-node/aws-04-22-2023/us-west-2b_v100_1.json"
)

// devCloud is the cloud section `gangway dev` runs: the config's own
// providers if it names any, else a fake cloud with a spot and an
// on-demand pool of 8 × A100 instances.
func devCloud(c config.CloudConfig, o devOptions) (config.CloudConfig, error) {
	out := c
	out.OnPremPricePerGPUHour = maps.Clone(c.OnPremPricePerGPUHour)
	if len(out.OnPremPricePerGPUHour) == 0 {
		out.OnPremPricePerGPUHour = map[string]float64{"onprem": devOnPremPrice}
	}
	switch {
	case !o.cloud:
		out.Providers = nil
		return out, nil
	case len(c.Providers) > 0:
		if err := out.Validate(); err != nil {
			return config.CloudConfig{}, fmt.Errorf("invalid cloud config:\n%w", err)
		}
		return out, nil
	}
	spot := config.FakePoolConfig{Name: "fake-a100-spot", Zone: "fake-1a", InstanceType: "a100x8", GPUModel: "A100", GPUs: 8,
		CapacityType: string(gangway.CapacitySpot), PricePerHour: 12, MaxInstances: 4}
	onDemand := config.FakePoolConfig{Name: "fake-a100-on-demand", Zone: "fake-1a", InstanceType: "a100x8", GPUModel: "A100", GPUs: 8,
		CapacityType: string(gangway.CapacityOnDemand), PricePerHour: 32.77, MaxInstances: 4}
	p := config.ProviderConfig{Name: "fake", Type: config.ProviderFake, BootDelay: gangway.Duration{Duration: 2 * time.Second}}
	trace := o.spotTrace
	if trace == "" {
		trace = sim.LocateTrace(devSpotTrace)
	}
	if trace != "" {
		tr, err := spotpolicy.LoadTrace(trace)
		if err != nil {
			return config.CloudConfig{}, fmt.Errorf("--spot-trace: %w", err)
		}
		// One trace unit stands for four instances; the demo starts where
		// the trace has spot capacity longest, so it is not preempted.
		spot.Trace, spot.TraceScale, spot.MaxInstances = trace, 4, 0
		p.TraceOffset = gangway.Duration{Duration: time.Duration(tr.LongestAvailable()) * tr.Gap}
	}
	p.Pools = []config.FakePoolConfig{spot, onDemand}
	out.Providers = []config.ProviderConfig{p}
	return out, nil
}

// reportLeftovers says whether any cloud instance outlived the demo,
// giving terminations a few seconds to land.
func reportLeftovers(ctx context.Context, c *fullstack.Cloud, out io.Writer) {
	if len(c.Registry.Names()) == 0 {
		return
	}
	left := c.WaitNoLeftovers(ctx, 15*time.Second)
	if len(left) == 0 {
		fmt.Fprintln(out, "\ncloud: no instance left running")
		return
	}
	fmt.Fprintf(out, "\ncloud: %d instances still running: %s (the reconciler terminates orphans after a minute)\n",
		len(left), strings.Join(left, ", "))
}
