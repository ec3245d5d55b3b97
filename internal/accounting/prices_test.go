package accounting

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
)

func TestOnDemandPrices(t *testing.T) {
	offer := func(provider, pool, zone, typ string, ct gangway.CapacityType, perHour float64) gangway.Offer {
		return gangway.Offer{Provider: provider, Pool: pool, Zone: zone, InstanceType: typ, GPUModel: "A100",
			GPUsPerInstance: 8, CapacityType: ct, PricePerHour: perHour}
	}
	tests := map[string]struct {
		offers     []gangway.Offer
		configured map[string]float64
		want       map[string]float64
	}{
		// The dev stack's fake cloud: one spot and one on-demand pool of
		// the same instance type.
		"same instance type": {
			offers: []gangway.Offer{offer("fake", "a100-spot", "z1", "a100x8", gangway.CapacitySpot, 12),
				offer("fake", "a100-od", "z1", "a100x8", gangway.CapacityOnDemand, 32)},
			want: map[string]float64{"a100-spot": 4},
		},
		"same zone preferred": {
			offers: []gangway.Offer{offer("aws", "od-b", "z2", "p4", gangway.CapacityOnDemand, 40),
				offer("aws", "spot-a", "z1", "p4", gangway.CapacitySpot, 12),
				offer("aws", "od-a", "z1", "p4", gangway.CapacityOnDemand, 32)},
			want: map[string]float64{"spot-a": 4},
		},
		"other instance type or provider is no price": {
			offers: []gangway.Offer{offer("aws", "spot-a", "z1", "p4", gangway.CapacitySpot, 12),
				offer("aws", "od", "z1", "p5", gangway.CapacityOnDemand, 32), offer("gcp", "od-g", "z1", "p4", gangway.CapacityOnDemand, 32)},
			want: map[string]float64{},
		},
		"configured wins": {
			offers: []gangway.Offer{offer("fake", "a100-spot", "z1", "a100x8", gangway.CapacitySpot, 12),
				offer("fake", "a100-od", "z1", "a100x8", gangway.CapacityOnDemand, 32)},
			configured: map[string]float64{"a100-spot": 5, "other-spot": 3},
			want:       map[string]float64{"a100-spot": 5, "other-spot": 3},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, OnDemandPrices(tt.offers, tt.configured)); diff != "" {
				t.Errorf("prices (-want +got):\n%s", diff)
			}
		})
	}
}
