package fake

import (
	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/providers"
)

// OnDemandPrices maps each spot pool of o to the on-demand price per
// GPU-hour of an on-demand pool of the same instance type, in the same zone
// if there is one.
func OnDemandPrices(o Options) map[string]float64 {
	name := o.Name
	if name == "" {
		name = "fake"
	}
	out := map[string]float64{}
	for _, spot := range o.Pools {
		if spot.CapacityType != gangway.CapacitySpot {
			continue
		}
		price := 0.0
		for _, od := range o.Pools {
			if od.CapacityType == gangway.CapacityOnDemand && od.InstanceType == spot.InstanceType && od.GPUs > 0 &&
				(price == 0 || od.Zone == spot.Zone) {
				price = od.PricePerHour / float64(od.GPUs)
			}
		}
		if price > 0 {
			pool := spot.Name
			if pool == "" {
				pool = providers.PoolName(name, spot.Zone, spot.InstanceType, spot.CapacityType)
			}
			out[pool] = price
		}
	}
	return out
}
