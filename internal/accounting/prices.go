package accounting

import (
	"maps"

	"github.com/gangwayhq/gangway"
)

// OnDemandPrices prices what spot saved: for each spot pool among offers,
// the on-demand price per GPU-hour of an on-demand offer of the same
// provider and instance type (in the same zone when there is one), over
// configured, which wins where both name a pool. The offers are those the
// servers publish (capacity.View.CloudOffers), so a client with no cloud
// config of its own, such as `gangway cost` beside `gangway dev`, still
// knows them.
func OnDemandPrices(offers []gangway.Offer, configured map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, spot := range offers {
		if spot.CapacityType != gangway.CapacitySpot {
			continue
		}
		price, sameZone := 0.0, false
		for _, od := range offers {
			if od.CapacityType != gangway.CapacityOnDemand || od.Provider != spot.Provider ||
				od.InstanceType != spot.InstanceType || od.GPUsPerInstance <= 0 || sameZone {
				continue
			}
			price, sameZone = od.PricePerGPUHour(), od.Zone == spot.Zone
		}
		if price > 0 {
			out[spot.Pool] = price
		}
	}
	maps.Copy(out, configured)
	return out
}
