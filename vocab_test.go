package gangway

import "testing"

func TestOfferPricePerGPUHourFor(t *testing.T) {
	o := Offer{GPUsPerInstance: 8, PricePerHour: 32}
	tests := map[string]struct {
		gpusPerReplica int
		want           float64
	}{
		"a replica on the whole instance":                {gpusPerReplica: 8, want: 4},
		"a replica pays for the GPUs it leaves idle":     {gpusPerReplica: 2, want: 16},
		"no GPUs per replica: the offer's per-GPU price": {gpusPerReplica: 0, want: 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := o.PricePerGPUHourFor(tc.gpusPerReplica); got != tc.want {
				t.Errorf("PricePerGPUHourFor = %v, want %v", got, tc.want)
			}
		})
	}
}
