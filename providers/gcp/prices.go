package gcp

import (
	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/providers"
)

// OnDemandPrices maps each spot pool these options can offer to the
// on-demand price per GPU-hour of the same machine type: each price's
// OnDemand over the type's GPUs, in each of Zones in the price's region. It
// makes no API call.
func OnDemandPrices(o Options) map[string]float64 {
	name := o.Name
	if name == "" {
		name = "gcp"
	}
	gpus := map[string]int{}
	for _, t := range o.MachineTypes {
		gpus[t.Name] = t.GPUs
	}
	out := map[string]float64{}
	for _, pr := range o.Prices {
		if pr.OnDemand <= 0 || gpus[pr.MachineType] <= 0 {
			continue
		}
		for _, z := range o.Zones {
			if region(z) == pr.Region {
				out[providers.PoolName(name, z, pr.MachineType, gangway.CapacitySpot)] = pr.OnDemand / float64(gpus[pr.MachineType])
			}
		}
	}
	return out
}
