package capacity

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLease(t *testing.T) {
	rdb := startRedis(t)
	const short = 100 * time.Millisecond

	// A step is one call; want is its result.
	type step struct {
		do   func(ctx context.Context, v *View) (bool, error)
		want bool
	}
	acquire := func(holder string, ttl time.Duration, want bool) step {
		return step{do: func(ctx context.Context, v *View) (bool, error) { return v.AcquireLease(ctx, holder, ttl) }, want: want}
	}
	release := func(holder string) step {
		return step{do: func(ctx context.Context, v *View) (bool, error) { return false, v.ReleaseLease(ctx, holder) }}
	}
	sleep := func(d time.Duration) step {
		return step{do: func(context.Context, *View) (bool, error) { time.Sleep(d); return false, nil }}
	}

	tests := map[string]struct {
		steps      []step
		wantHolder string
	}{
		"acquire free lease": {
			steps:      []step{acquire("a", time.Minute, true)},
			wantHolder: "a",
		},
		"holder renews": {
			steps:      []step{acquire("a", time.Minute, true), acquire("a", time.Minute, true)},
			wantHolder: "a",
		},
		"other cannot take a live lease": {
			steps:      []step{acquire("a", time.Minute, true), acquire("b", time.Minute, false)},
			wantHolder: "a",
		},
		"renewal extends the ttl": {
			steps: []step{
				acquire("a", short, true),
				acquire("a", time.Hour, true),
				sleep(short * 2), // past the first ttl
				acquire("b", time.Minute, false),
			},
			wantHolder: "a",
		},
		"other takes an expired lease": {
			steps: []step{
				acquire("a", short, true),
				sleep(short * 2),
				acquire("b", time.Minute, true),
				acquire("a", time.Minute, false),
			},
			wantHolder: "b",
		},
		"release by non-holder does nothing": {
			steps:      []step{acquire("a", time.Minute, true), release("b")},
			wantHolder: "a",
		},
		"release by holder frees it for others": {
			steps:      []step{acquire("a", time.Minute, true), release("a"), acquire("b", time.Minute, true)},
			wantHolder: "b",
		},
		"release of a free lease": {
			steps:      []step{release("a")},
			wantHolder: "",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			v := newView(rdb, Options{})
			for i, s := range tc.steps {
				got, err := s.do(ctx, v)
				must(t, err)
				if got != s.want {
					t.Fatalf("step %d: got %v, want %v", i, got, s.want)
				}
			}
			h, err := v.LeaseHolder(ctx)
			must(t, err)
			if diff := cmp.Diff(tc.wantHolder, h); diff != "" {
				t.Errorf("LeaseHolder() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLeaseBadInput(t *testing.T) {
	rdb := startRedis(t)
	v := newView(rdb, Options{})
	if _, err := v.AcquireLease(t.Context(), "", time.Second); err == nil {
		t.Error("AcquireLease with empty holder: no error")
	}
	if _, err := v.AcquireLease(t.Context(), "a", 0); err == nil {
		t.Error("AcquireLease with zero ttl: no error")
	}
}
