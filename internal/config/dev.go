package config

import (
	"fmt"
	"maps"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

// DevOnPremPrice is the amortized price per GPU-hour of `gangway dev`'s
// simulated H100s when the config gives none (an 8 × H100 server over four
// years, with power).
const DevOnPremPrice = 2.5

// DevCloud is the cloud section `gangway dev` runs: none without cloud, the
// config's own providers if it names any, else a fake cloud with a spot and
// an on-demand pool of 8 × A100 instances, the spot pool following
// spotTrace when it is not "".
func DevCloud(c CloudConfig, cloud bool, spotTrace string) (CloudConfig, error) {
	out := c
	out.OnPremPricePerGPUHour = maps.Clone(c.OnPremPricePerGPUHour)
	if len(out.OnPremPricePerGPUHour) == 0 {
		out.OnPremPricePerGPUHour = map[string]float64{"onprem": DevOnPremPrice}
	}
	switch {
	case !cloud:
		out.Providers = nil
		return out, nil
	case len(c.Providers) > 0:
		if err := out.Validate(); err != nil {
			return CloudConfig{}, fmt.Errorf("invalid cloud config:\n%w", err)
		}
		return out, nil
	}
	spot := FakePoolConfig{Name: "fake-a100-spot", Zone: "fake-1a", InstanceType: "a100x8", GPUModel: "A100", GPUs: 8,
		CapacityType: string(gangway.CapacitySpot), PricePerHour: 12, MaxInstances: 4}
	onDemand := FakePoolConfig{Name: "fake-a100-on-demand", Zone: "fake-1a", InstanceType: "a100x8", GPUModel: "A100", GPUs: 8,
		CapacityType: string(gangway.CapacityOnDemand), PricePerHour: 32.77, MaxInstances: 4}
	p := ProviderConfig{Name: "fake", Type: ProviderFake, BootDelay: gangway.Duration{Duration: 2 * time.Second}}
	if trace := spotTrace; trace != "" {
		tr, err := spotpolicy.LoadTrace(trace)
		if err != nil {
			return CloudConfig{}, fmt.Errorf("--spot-trace: %w", err)
		}
		// One trace unit stands for four instances; the demo starts where
		// the trace has spot capacity longest, so it is not preempted.
		spot.Trace, spot.TraceScale, spot.MaxInstances = trace, 4, 0
		p.TraceOffset = gangway.Duration{Duration: time.Duration(tr.LongestAvailable()) * tr.Gap}
	}
	p.Pools = []FakePoolConfig{spot, onDemand}
	out.Providers = []ProviderConfig{p}
	return out, nil
}
