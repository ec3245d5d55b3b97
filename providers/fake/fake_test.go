package fake_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
	"github.com/gangwayhq/gangway/internal/testclock"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/fake"
	"github.com/gangwayhq/gangway/providers/providertest"
)

type clock = testclock.Clock

var t0 = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

var v100 = fake.Pool{Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p3.2xlarge", GPUModel: "V100", GPUs: 1,
	CapacityType: gangway.CapacitySpot, PricePerHour: 0.918}

// controller drives the fake's fault injection for the conformance suite.
type controller struct{ p *fake.Provider }

func (c controller) NoCapacity() {
	c.p.FailNext(fake.OpLaunch, fmt.Errorf("%w: InsufficientInstanceCapacity", providers.ErrNoCapacity))
}
func (c controller) Throttle()           { c.p.FailNext(fake.OpAny, providers.ErrThrottled) }
func (c controller) HangNextLaunch()     { c.p.HangNextLaunch() }
func (c controller) LimitLaunches(n int) { c.p.LimitLaunches(n) }
func (c controller) Reset()              { c.p.ClearFaults() }

func TestConformance(t *testing.T) {
	od := v100
	od.CapacityType, od.PricePerHour = gangway.CapacityOnDemand, 3.06
	p, err := fake.New(fake.Options{Pools: []fake.Pool{v100, od}, BootDelay: time.Minute, Clock: testclock.New(t0)})
	if err != nil {
		t.Fatal(err)
	}
	providertest.Run(t, func(*testing.T) providers.Provider { return p }, controller{p})
}

// TestBootAndNotices follows one spot instance through a trace: it boots
// after the delay, gets a notice when the trace drops to zero, and is
// taken the notice lead later; the callbacks see each step.
func TestBootAndNotices(t *testing.T) {
	tests := map[string]struct {
		lead time.Duration
	}{
		"aws style": {lead: fake.AWSNoticeLead},
		"gcp style": {lead: fake.GCPNoticeLead},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk := testclock.New(t0)
			// One tick per minute: available for 5 minutes, then gone for 3.
			trace := &spotpolicy.Trace{Name: "test", Gap: time.Minute, Available: []int{1, 1, 1, 1, 1, 0, 0, 0}}
			pool := v100
			pool.Trace = trace
			var mu sync.Mutex
			var events []string
			record := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, fmt.Sprintf("%s "+format, append([]any{clk.Now().Sub(t0)}, args...)...))
			}
			p, err := fake.New(fake.Options{
				Pools: []fake.Pool{pool}, BootDelay: 90 * time.Second, NoticeLead: tc.lead, Clock: clk,
				OnRunning: func(in providers.Instance) { record("running %s", in.ID) },
				OnNotice: func(n fake.Notice) {
					record("notice %s at %s, terminate at %s", n.InstanceID, n.At.Sub(t0), n.TerminateAt.Sub(t0))
				},
				OnTerminated: func(in providers.Instance) { record("terminated %s (%s)", in.ID, in.StateReason) },
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			offers, err := p.Offers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ins, err := p.Launch(ctx, providers.LaunchRequest{Offer: offers[0], Count: 1, Token: providers.Token("j", 1), JobID: "j", Attempt: 1})
			if err != nil {
				t.Fatal(err)
			}
			id := ins[0].ID
			if ins[0].State != providers.Pending {
				t.Errorf("just launched: %s, want pending", ins[0].State)
			}
			// A second instance does not fit: the trace allows one.
			if _, err := p.Launch(ctx, providers.LaunchRequest{Offer: offers[0], Count: 1, Token: providers.Token("k", 1), JobID: "k", Attempt: 1}); !errors.Is(err, providers.ErrNoCapacity) {
				t.Errorf("second launch: %v, want ErrNoCapacity", err)
			}
			for range 16 {
				clk.Advance(30 * time.Second)
				p.Tick()
			}
			if _, ok := p.Notice(id); !ok {
				t.Errorf("no notice served for %s", id)
			}
			got, err := p.Describe(ctx, []string{id})
			if err != nil || len(got) != 1 || got[0].State != providers.Terminated {
				t.Fatalf("Describe after the reclaim: %v, %v; want terminated", got, err)
			}
			leadOver := 5*time.Minute + tc.lead
			want := []string{
				"1m30s running " + id,
				fmt.Sprintf("5m0s notice %s at 5m0s, terminate at %s", id, leadOver),
				fmt.Sprintf("%s terminated %s (preempted)", leadOver, id),
			}
			if diff := cmp.Diff(want, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPreemptAndPrices(t *testing.T) {
	clk := testclock.New(t0)
	trace := &spotpolicy.Trace{Gap: time.Hour, Available: []int{1, 1}, Prices: []float64{0.5, 0.7}}
	pool := v100
	pool.Trace, pool.TraceScale = trace, 4
	p, err := fake.New(fake.Options{Pools: []fake.Pool{pool}, Clock: clk, NoticeLead: fake.GCPNoticeLead})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	price := func() float64 {
		offers, err := p.Offers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return offers[0].PricePerHour
	}
	if got := price(); got != 0.5 {
		t.Errorf("price at tick 0 = %v, want 0.5", got)
	}
	offers, _ := p.Offers(ctx)
	req := providers.LaunchRequest{Offer: offers[0], Count: 4, Token: providers.Token("j", 1), JobID: "j", Attempt: 1,
		MaxPricePerHour: 0.6, Join: providers.Join{FakeGPUs: true, RedisURL: "redis://x"}}
	ins, err := p.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if ins[0].State != providers.Running {
		t.Errorf("no boot delay: %s, want running", ins[0].State)
	}
	script, _ := p.UserData(ins[0].ID)
	for _, want := range []string{"--node-id \"$NODE_ID\"", "--pool " + ins[0].Pool, "--fake-gpus 1xV100", "NODE_ID=\"$(echo " + ins[0].ID + ")\"", "export GANGWAY_REDIS_URL=redis://x"} {
		if !strings.Contains(script, want) {
			t.Errorf("boot script lacks %q:\n%s", want, script)
		}
	}
	if err := p.Preempt(ins[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := p.Preempt("nope"); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Preempt(unknown) = %v, want ErrNotFound", err)
	}
	clk.Advance(fake.GCPNoticeLead)
	live, _ := p.ListByTag(ctx, providers.TagJob, "j")
	if len(live) != 3 {
		t.Errorf("%d live after one preemption, want 3", len(live))
	}
	clk.Advance(time.Hour)
	if got := price(); got != 0.7 {
		t.Errorf("price at tick 1 = %v, want 0.7", got)
	}
	req.Token, req.Count = providers.Token("j", 2), 1
	if _, err := p.Launch(ctx, req); !errors.Is(err, providers.ErrPriceTooLow) || providers.Retryable(err) {
		t.Errorf("launch above max price: %v, want non-retryable ErrPriceTooLow", err)
	}
	// The trace wraps: tick 2 is tick 0 again.
	clk.Advance(time.Hour)
	if got := price(); got != 0.5 {
		t.Errorf("price at tick 2 = %v, want 0.5 (wrapped)", got)
	}
}

func TestSetCapacity(t *testing.T) {
	p, err := fake.New(fake.Options{Pools: []fake.Pool{v100}, Clock: testclock.New(t0)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	offers, _ := p.Offers(ctx)
	if err := p.SetCapacity(offers[0].Pool, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.SetCapacity("nope", 1); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("SetCapacity(unknown) = %v", err)
	}
	req := providers.LaunchRequest{Offer: offers[0], Count: 2, Token: providers.Token("j", 1), JobID: "j", Attempt: 1}
	if _, err := p.Launch(ctx, req); !errors.Is(err, providers.ErrNoCapacity) {
		t.Errorf("2 in a pool of 1: %v, want ErrNoCapacity", err)
	}
	req.MinCount = 1
	got, err := p.Launch(ctx, req)
	if err != nil || len(got) != 1 {
		t.Errorf("2, min 1, in a pool of 1: %v, %v", got, err)
	}
}

func TestNewRejectsBadPools(t *testing.T) {
	tests := map[string]struct {
		pools   []fake.Pool
		wantErr string
	}{
		"twice":         {pools: []fake.Pool{v100, v100}, wantErr: "given twice"},
		"no type":       {pools: []fake.Pool{{Zone: "z", CapacityType: gangway.CapacitySpot}}, wantErr: "instanceType is required"},
		"no zone":       {pools: []fake.Pool{{InstanceType: "t", CapacityType: gangway.CapacitySpot}}, wantErr: "zone is required"},
		"bad capacity":  {pools: []fake.Pool{{Zone: "z", InstanceType: "t", CapacityType: "reserved"}}, wantErr: "capacityType"},
		"negative gpus": {pools: []fake.Pool{{Zone: "z", InstanceType: "t", GPUs: -1, CapacityType: gangway.CapacitySpot}}, wantErr: "gpus"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := fake.New(fake.Options{Pools: tc.pools})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

// TestSharedTracePool runs a pool on a shared spot trace for a simulated
// day, without a real-time wait.
func TestSharedTracePool(t *testing.T) {
	files, _ := filepath.Glob("../../../shared/traces/spot/*/*/*/*.json")
	if len(files) == 0 {
		t.Skip("no shared spot traces at ../shared/traces/spot")
	}
	tr, err := spotpolicy.LoadTrace(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.New(t0)
	pool := v100
	pool.Trace = tr
	notices := 0
	p, err := fake.New(fake.Options{Pools: []fake.Pool{pool}, Clock: clk, OnNotice: func(fake.Notice) { notices++ }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	offers, _ := p.Offers(ctx)
	launched := 0
	for step := range 24 * 60 {
		clk.Advance(time.Minute)
		req := providers.LaunchRequest{Offer: offers[0], Count: 1, Token: providers.Token("day", step), JobID: "day", Attempt: step}
		if live, _ := p.ListByTag(ctx, providers.TagJob, "day"); len(live) == 0 {
			if _, err := p.Launch(ctx, req); err == nil {
				launched++
			} else if !errors.Is(err, providers.ErrNoCapacity) {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%s: %d launches, %d notices in a simulated day", tr.Name, launched, notices)
	if launched == 0 {
		t.Error("never launched in a day of trace")
	}
	if notices > launched {
		t.Errorf("%d notices for %d launches", notices, launched)
	}
}

// TestIDPrefix: instance (and node) IDs start with IDPrefix, "fake" by
// default, so that fakes in two servers sharing one view never hand out
// the same node.
func TestIDPrefix(t *testing.T) {
	ctx := context.Background()
	for prefix, want := range map[string]string{"": "fake-000001", "fake-s2": "fake-s2-000001"} {
		p, err := fake.New(fake.Options{IDPrefix: prefix, Pools: []fake.Pool{v100}, Clock: testclock.New(t0)})
		if err != nil {
			t.Fatal(err)
		}
		offers, _ := p.Offers(ctx)
		got, err := p.Launch(ctx, providers.LaunchRequest{Offer: offers[0], Count: 1, Token: providers.Token("j", 1), JobID: "j", Attempt: 1})
		if err != nil || len(got) != 1 || got[0].ID != want || got[0].NodeID != want {
			t.Errorf("IDPrefix %q: launched %+v (%v), want instance and node %s", prefix, got, err, want)
		}
	}
}
