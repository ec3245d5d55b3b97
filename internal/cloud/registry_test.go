package cloud_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/testclock"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/fake"
)

// counting counts Offers calls on a provider.
type counting struct {
	providers.Provider
	calls int
}

func (c *counting) Offers(ctx context.Context) ([]gangway.Offer, error) {
	c.calls++
	return c.Provider.Offers(ctx)
}

func pools(offers []gangway.Offer) []string {
	var out []string
	for _, o := range offers {
		out = append(out, o.Provider+"/"+o.Pool)
	}
	return out
}

func TestRegistryOffers(t *testing.T) {
	c := testclock.New(t0)
	// Given out of order: the registry sorts by name.
	bc, ac := newCloud(t, "b-cloud", c), newCloud(t, "a-cloud", c)
	cb, ca := &counting{Provider: bc}, &counting{Provider: ac}
	reg, err := cloud.NewRegistry([]providers.Provider{cb, ca}, cloud.RegistryOptions{OffersTTL: time.Minute, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a-cloud", "b-cloud"}, reg.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	want := []string{"a-cloud/a100-spot", "a-cloud/a100-od", "b-cloud/a100-spot", "b-cloud/a100-od"}
	got, err := reg.Offers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, pools(got)); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}

	// Within the TTL the cache answers.
	c.Advance(30 * time.Second)
	if _, err := reg.Offers(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ca.calls != 1 || cb.calls != 1 {
		t.Errorf("calls within TTL: %d, %d; want 1, 1", ca.calls, cb.calls)
	}

	// Past it, a failing provider is left out and the other still answers.
	c.Advance(time.Minute)
	bc.FailNext(fake.OpOffers, fmt.Errorf("%w: bad key", providers.ErrAuth))
	got, err = reg.Offers(t.Context())
	if err != nil {
		t.Fatalf("one provider failing is not an error: %v", err)
	}
	if diff := cmp.Diff([]string{"a-cloud/a100-spot", "a-cloud/a100-od"}, pools(got)); diff != "" {
		t.Errorf("offers with b-cloud failing (-want +got):\n%s", diff)
	}
	// The failed provider is asked again next time, not served stale.
	got, _ = reg.Offers(t.Context())
	if diff := cmp.Diff(want, pools(got)); diff != "" {
		t.Errorf("offers after recovery (-want +got):\n%s", diff)
	}
	if ca.calls != 2 || cb.calls != 3 {
		t.Errorf("calls: a-cloud %d, b-cloud %d; want 2, 3", ca.calls, cb.calls)
	}
}

func TestRegistryLookups(t *testing.T) {
	c := testclock.New(t0)
	p := newCloud(t, "fake", c)
	if _, err := cloud.NewRegistry([]providers.Provider{p, newCloud(t, "fake", c)}, cloud.RegistryOptions{}); err == nil || !strings.Contains(err.Error(), `"fake" given twice`) {
		t.Errorf("duplicate names: err %v", err)
	}
	reg, err := cloud.NewRegistry([]providers.Provider{p}, cloud.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := reg.Provider("fake"); !ok || got != p {
		t.Errorf("Provider(fake) = %v, %t", got, ok)
	}
	if _, ok := reg.Provider("aws"); ok {
		t.Error("Provider(aws) found in a registry without it")
	}

	var none *cloud.Registry
	if offers, err := none.Offers(t.Context()); offers != nil || err != nil {
		t.Errorf("nil registry: offers %v, err %v", offers, err)
	}
	if _, ok := none.Provider("fake"); ok || len(none.Providers()) != 0 {
		t.Error("nil registry has providers")
	}
}
