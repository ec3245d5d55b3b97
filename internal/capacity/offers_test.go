package capacity

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
)

// TestPublishOffers: offers published by several servers add up by pool,
// a later publish of a pool replaces it, and the record expires.
func TestPublishOffers(t *testing.T) {
	rdb := startRedis(t)
	v := newView(rdb, Options{})
	ctx := t.Context()
	spot := gangway.Offer{Provider: "fake", Pool: "a100-spot", Zone: "z", InstanceType: "a100x8", GPUModel: "A100",
		GPUsPerInstance: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 12}
	od := spot
	od.Pool, od.CapacityType, od.PricePerHour = "a100-od", gangway.CapacityOnDemand, 32

	if got, err := v.CloudOffers(ctx); err != nil || len(got) != 0 {
		t.Fatalf("CloudOffers before any publish = %v, %v; want none", got, err)
	}
	if err := v.PublishOffers(ctx, []gangway.Offer{spot}, time.Minute); err != nil {
		t.Fatal(err)
	}
	spot.PricePerHour = 10
	if err := v.PublishOffers(ctx, []gangway.Offer{od, spot}, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := v.CloudOffers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]gangway.Offer{od, spot}, got); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}
	if err := v.PublishOffers(ctx, []gangway.Offer{spot}, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if got, err := v.CloudOffers(ctx); err != nil || len(got) != 0 {
		t.Errorf("CloudOffers after the TTL = %v, %v; want none", got, err)
	}
}
