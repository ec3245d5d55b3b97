package cloud

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/providers"
)

// Registry defaults.
const (
	DefaultOffersTTL     = 15 * time.Second
	DefaultOffersTimeout = 10 * time.Second
)

// RegistryOptions tune a Registry.
type RegistryOptions struct {
	// OffersTTL is how long a provider's offers are reused before it is
	// asked again; 0 means DefaultOffersTTL. Spot prices move on the scale
	// of minutes, dispatch cycles on the scale of a second.
	OffersTTL time.Duration
	// OffersTimeout bounds one provider's Offers call; 0 means
	// DefaultOffersTimeout. A slow cloud must not hold up dispatch.
	OffersTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Registry is the set of configured providers by name. A nil *Registry is
// an empty one: no providers, no offers. It is safe for concurrent use.
type Registry struct {
	names  []string // sorted
	byName map[string]providers.Provider
	opts   RegistryOptions

	mu    sync.Mutex
	cache map[string]cachedOffers
}

type cachedOffers struct {
	offers []gangway.Offer
	at     time.Time
}

// NewRegistry builds a registry of ps. Names must be unique and non-empty.
func NewRegistry(ps []providers.Provider, opts RegistryOptions) (*Registry, error) {
	if opts.OffersTTL <= 0 {
		opts.OffersTTL = DefaultOffersTTL
	}
	if opts.OffersTimeout <= 0 {
		opts.OffersTimeout = DefaultOffersTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	r := &Registry{byName: map[string]providers.Provider{}, opts: opts, cache: map[string]cachedOffers{}}
	for i, p := range ps {
		name := p.Name()
		switch {
		case name == "":
			return nil, fmt.Errorf("cloud registry: provider %d has an empty name", i)
		case r.byName[name] != nil:
			return nil, fmt.Errorf("cloud registry: provider name %q given twice", name)
		}
		r.byName[name] = p
		r.names = append(r.names, name)
	}
	slices.Sort(r.names)
	return r, nil
}

// Provider returns the provider called name.
func (r *Registry) Provider(name string) (providers.Provider, bool) {
	if r == nil {
		return nil, false
	}
	p, ok := r.byName[name]
	return p, ok
}

// Providers returns every provider, by name.
func (r *Registry) Providers() []providers.Provider {
	if r == nil {
		return nil
	}
	out := make([]providers.Provider, 0, len(r.names))
	for _, n := range r.names {
		out = append(out, r.byName[n])
	}
	return out
}

// Names lists the providers' names, sorted.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.names)
}

// Offers lists what every provider can launch now, providers in name
// order. A provider's answer is reused for OffersTTL. A provider that
// fails is logged and left out (its stale prices are not served: a burst
// priced on them could overspend); the others still answer. The error is
// non-nil only when ctx ended.
func (r *Registry) Offers(ctx context.Context) ([]gangway.Offer, error) {
	if r == nil || len(r.names) == 0 {
		return nil, ctx.Err()
	}
	now := r.opts.Now()
	fresh := make([][]gangway.Offer, len(r.names))
	var stale []int
	r.mu.Lock()
	for i, n := range r.names {
		if c, ok := r.cache[n]; ok && now.Sub(c.at) < r.opts.OffersTTL {
			fresh[i] = c.offers
		} else {
			stale = append(stale, i)
		}
	}
	r.mu.Unlock()

	var wg sync.WaitGroup
	for _, i := range stale {
		name := r.names[i]
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, r.opts.OffersTimeout)
			defer cancel()
			offers, err := r.byName[name].Offers(cctx)
			if err != nil {
				if ctx.Err() == nil {
					r.opts.Log.Warn("cloud offers unavailable", "provider", name, "reason", providers.Reason(err), "error", err)
				}
				r.mu.Lock()
				delete(r.cache, name)
				r.mu.Unlock()
				return
			}
			fresh[i] = offers
			r.mu.Lock()
			r.cache[name] = cachedOffers{offers: offers, at: now}
			r.mu.Unlock()
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []gangway.Offer
	for _, o := range fresh {
		out = append(out, o...)
	}
	return out, nil
}
