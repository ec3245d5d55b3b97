package capacity

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
)

// PublishOffers records the cloud offers a server's providers make, by
// pool, for the submit-time fleet check and for `gangway cost`'s on-demand
// prices: clients know the cloud only through them. Pools from several
// servers add up; the record expires ttl after the last publish, so the
// pools of a server that stopped bursting drop out.
func (v *View) PublishOffers(ctx context.Context, offers []gangway.Offer, ttl time.Duration) error {
	if len(offers) == 0 {
		return nil
	}
	fields := make(map[string]any, len(offers))
	for _, o := range offers {
		b, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("publish offers: encode %s: %w", o.Pool, err)
		}
		fields[o.Pool] = b
	}
	_, err := v.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, v.k.offers, fields)
		p.PExpire(ctx, v.k.offers, ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("publish offers: %w", err)
	}
	return nil
}

// CloudOffers returns the published offers, one per pool, sorted by pool;
// none when no server with a cloud has published.
func (v *View) CloudOffers(ctx context.Context) ([]gangway.Offer, error) {
	m, err := v.rdb.HGetAll(ctx, v.k.offers).Result()
	if err != nil {
		return nil, fmt.Errorf("cloud offers: %w", err)
	}
	out := make([]gangway.Offer, 0, len(m))
	for pool, raw := range m {
		var o gangway.Offer
		if err := json.Unmarshal([]byte(raw), &o); err != nil {
			return nil, fmt.Errorf("cloud offers: decode %s: %w", pool, err)
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b gangway.Offer) int { return strings.Compare(a.Pool, b.Pool) })
	return out, nil
}
