package aws

import (
	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/providers"
)

// OnDemandPrices maps each spot pool these options can offer to the
// on-demand price per GPU-hour of the same instance type (its
// OnDemandPrice over its GPUs), in each of Zones or, when Zones is empty,
// zones a to f of the region. It makes no API call: `gangway cost` prices
// what spot saved without credentials.
func OnDemandPrices(o Options) map[string]float64 {
	name := o.Name
	if name == "" {
		name = "aws"
	}
	zones := o.Zones
	if len(zones) == 0 {
		for _, letter := range "abcdef" {
			zones = append(zones, o.Region+string(letter))
		}
	}
	out := map[string]float64{}
	for _, t := range o.InstanceTypes {
		if t.OnDemandPrice <= 0 || t.GPUs <= 0 {
			continue
		}
		for _, z := range zones {
			out[providers.PoolName(name, z, t.Name, gangway.CapacitySpot)] = t.OnDemandPrice / float64(t.GPUs)
		}
	}
	return out
}
