package capacity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// AcquireLease takes the dispatch leader lease for ttl, or renews it if
// holder already has it. It returns true if holder now holds the lease and
// false if someone else does. A holder that stops renewing loses the lease
// when ttl runs out, and another may take it.
func (v *View) AcquireLease(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	if holder == "" {
		return false, errors.New("acquire lease: empty holder")
	}
	if ttl < time.Millisecond {
		return false, fmt.Errorf("acquire lease: ttl %v is under 1ms", ttl)
	}
	n, err := leaseAcquireScript.Run(ctx, v.rdb, []string{v.k.lease}, holder, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("acquire lease: %w", err)
	}
	return n == 1, nil
}

// ReleaseLease gives up the lease if holder holds it, so another dispatcher
// can lead at once instead of waiting for the TTL. Releasing a lease one
// does not hold does nothing.
func (v *View) ReleaseLease(ctx context.Context, holder string) error {
	if err := leaseReleaseScript.Run(ctx, v.rdb, []string{v.k.lease}, holder).Err(); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

// LeaseHolder returns who holds the dispatch lease, or "" if nobody does.
func (v *View) LeaseHolder(ctx context.Context) (string, error) {
	h, err := v.rdb.Get(ctx, v.k.lease).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("lease holder: %w", err)
	}
	return h, nil
}
