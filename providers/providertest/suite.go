package providertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/providers"
)

// Controller makes the backend behind a provider misbehave. Each fault hits
// the next matching call only. The suite runs its cases one at a time and
// calls Reset after each.
type Controller interface {
	// NoCapacity makes the next launch fail the way the cloud reports a
	// stockout (EC2 InsufficientInstanceCapacity, GCE
	// ZONE_RESOURCE_POOL_EXHAUSTED), launching nothing.
	NoCapacity()
	// Throttle makes the next API call fail the way the cloud reports rate
	// limiting (EC2 RequestLimitExceeded, GCE 429), without effect.
	Throttle()
	// HangNextLaunch makes the next launch take effect in the backend but
	// never answer: only the caller's context ends the call.
	HangNextLaunch()
	// LimitLaunches lets at most n more instances launch in all (partial
	// fulfilment); n < 0 lifts the limit.
	LimitLaunches(n int)
	// Reset clears every fault and limit.
	Reset()
}

// hangTimeout bounds the launch that HangNextLaunch leaves unanswered.
const hangTimeout = 300 * time.Millisecond

var run atomic.Int64

// Run holds a provider to the Provider contract. newProvider returns a
// provider backed by the one backend ctl controls (it may return the same
// provider every time); every case uses its own job IDs, so the backend may
// be shared with other tests.
func Run(t *testing.T, newProvider func(t *testing.T) providers.Provider, ctl Controller) {
	t.Helper()
	prefix := fmt.Sprintf("conf-%d-", run.Add(1))
	cases := []struct {
		name string
		test func(t *testing.T, s *suite)
	}{
		{"Offers", testOffers},
		{"Lifecycle", testLifecycle},
		{"SameTokenLaunchesOnce", testSameToken},
		{"TokenReusedDifferently", testTokenMismatch},
		{"TerminateTwice", testTerminateTwice},
		{"InvalidRequest", testInvalid},
		{"NoCapacity", testNoCapacity},
		{"Throttled", testThrottled},
		{"TimeoutThenRetry", testTimeoutRetry},
		{"PartialFulfilment", testPartial},
		{"AllOrNothing", testAllOrNothing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctl.Reset()
			t.Cleanup(ctl.Reset)
			s := &suite{p: newProvider(t), ctl: ctl, job: prefix + strings.ToLower(c.name)}
			t.Cleanup(func() { s.cleanup(t) })
			c.test(t, s)
		})
	}
}

type suite struct {
	p   providers.Provider
	ctl Controller
	job string
}

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// offer is the first spot offer (the first offer when there is none).
func (s *suite) offer(t *testing.T) gangway.Offer {
	t.Helper()
	offers, err := s.p.Offers(ctx(t))
	if err != nil {
		t.Fatalf("Offers: %v", err)
	}
	if len(offers) == 0 {
		t.Fatal("Offers: none")
	}
	for _, o := range offers {
		if o.CapacityType == gangway.CapacitySpot {
			return o
		}
	}
	return offers[0]
}

func (s *suite) request(t *testing.T, count, attempt int) providers.LaunchRequest {
	t.Helper()
	return providers.LaunchRequest{
		Offer: s.offer(t), Count: count, Token: providers.Token(s.job, attempt),
		JobID: s.job, Attempt: attempt,
		Join: providers.Join{TemporalAddress: "temporal.example:7233", RedisURL: "redis://:secret@redis.example:6379/0", FakeGPUs: true},
		Tags: map[string]string{"team": "conformance"},
	}
}

// cleanup terminates whatever the case left.
func (s *suite) cleanup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	left, err := s.p.ListByTag(ctx, providers.TagJob, s.job)
	if err != nil {
		t.Errorf("cleanup: ListByTag: %v", err)
		return
	}
	if len(left) > 0 {
		if err := s.p.Terminate(ctx, ids(left)); err != nil {
			t.Errorf("cleanup: Terminate: %v", err)
		}
	}
}

// live lists the live instances tagged with the case's job.
func (s *suite) live(t *testing.T) []providers.Instance {
	t.Helper()
	got, err := s.p.ListByTag(ctx(t), providers.TagJob, s.job)
	if err != nil {
		t.Fatalf("ListByTag(%s, %s): %v", providers.TagJob, s.job, err)
	}
	return slices.DeleteFunc(got, func(in providers.Instance) bool { return !in.State.Live() })
}

func ids(ins []providers.Instance) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.ID
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func testOffers(t *testing.T, s *suite) {
	offers, err := s.p.Offers(ctx(t))
	if err != nil {
		t.Fatalf("Offers: %v", err)
	}
	if len(offers) == 0 {
		t.Fatal("Offers: none")
	}
	for _, o := range offers {
		var problems []string
		if o.Provider != s.p.Name() {
			problems = append(problems, fmt.Sprintf("provider %q, want %q", o.Provider, s.p.Name()))
		}
		if o.Pool == "" || o.InstanceType == "" || o.Zone == "" {
			problems = append(problems, "pool, instance type and zone are required")
		}
		if o.GPUsPerInstance <= 0 || o.GPUModel == "" {
			problems = append(problems, fmt.Sprintf("%d GPUs of model %q", o.GPUsPerInstance, o.GPUModel))
		}
		if !o.CapacityType.Cloud() {
			problems = append(problems, fmt.Sprintf("capacity type %q", o.CapacityType))
		}
		if o.PricePerHour <= 0 {
			problems = append(problems, fmt.Sprintf("price %v", o.PricePerHour))
		}
		if o.InterruptionRate < 0 || o.CapacityType == gangway.CapacityOnDemand && o.InterruptionRate != 0 {
			problems = append(problems, fmt.Sprintf("interruption rate %v for %s", o.InterruptionRate, o.CapacityType))
		}
		if len(problems) > 0 {
			t.Errorf("offer %+v: %s", o, strings.Join(problems, "; "))
		}
	}
}

func testLifecycle(t *testing.T, s *suite) {
	req := s.request(t, 2, 1)
	got, err := s.p.Launch(ctx(t), req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("Launch: %d instances, want 2", len(got))
	}
	for _, in := range got {
		checkInstance(t, s, req, in)
	}

	described, err := s.p.Describe(ctx(t), ids(got))
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if diff := cmp.Diff(ids(got), ids(described)); diff != "" {
		t.Errorf("Describe: IDs differ from Launch's (-launch +describe):\n%s", diff)
	}
	for _, in := range described {
		checkInstance(t, s, req, in)
	}

	for _, tag := range []struct{ key, value string }{
		{providers.TagJob, s.job}, {providers.TagToken, req.Token}, {providers.TagJob, ""},
	} {
		listed, err := s.p.ListByTag(ctx(t), tag.key, tag.value)
		if err != nil {
			t.Fatalf("ListByTag(%s, %q): %v", tag.key, tag.value, err)
		}
		var mine []string
		for _, in := range listed {
			if in.Tags[providers.TagJob] == s.job {
				mine = append(mine, in.ID)
			}
			if tag.value != "" && in.Tags[tag.key] != tag.value {
				t.Errorf("ListByTag(%s, %q) returned %s tagged %q", tag.key, tag.value, in.ID, in.Tags[tag.key])
			}
		}
		if diff := cmp.Diff(sorted(ids(got)), sorted(mine)); diff != "" {
			t.Errorf("ListByTag(%s, %q): (-launched +listed):\n%s", tag.key, tag.value, diff)
		}
	}

	if err := s.p.Terminate(ctx(t), ids(got)); err != nil {
		t.Fatalf("Terminate: %v", err)
	}
	after, err := s.p.Describe(ctx(t), ids(got))
	if err != nil {
		t.Fatalf("Describe after Terminate: %v", err)
	}
	for _, in := range after {
		if in.State.Live() {
			t.Errorf("after Terminate, %s is %s", in.ID, in.State)
		}
	}
	if live := s.live(t); len(live) != 0 {
		t.Errorf("after Terminate, ListByTag finds live %v", ids(live))
	}
}

func checkInstance(t *testing.T, s *suite, req providers.LaunchRequest, in providers.Instance) {
	t.Helper()
	if in.ID == "" || in.NodeID == "" {
		t.Errorf("instance %+v: empty ID or NodeID", in)
	}
	if !in.State.Live() {
		t.Errorf("instance %s: state %s, want pending or running", in.ID, in.State)
	}
	want := map[string]string{
		providers.TagJob: s.job, providers.TagAttempt: fmt.Sprint(req.Attempt),
		providers.TagToken: req.Token, providers.TagPool: req.Offer.Pool, "team": "conformance",
	}
	got := map[string]string{}
	for k := range want {
		got[k] = in.Tags[k]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instance %s tags (-want +got):\n%s", in.ID, diff)
	}
	if in.Provider != s.p.Name() || in.Pool != req.Offer.Pool || in.InstanceType != req.Offer.InstanceType ||
		in.CapacityType != req.Offer.CapacityType || in.GPUs != req.Offer.GPUsPerInstance || in.GPUModel != req.Offer.GPUModel {
		t.Errorf("instance %+v does not match offer %+v", in, req.Offer)
	}
}

func testSameToken(t *testing.T, s *suite) {
	req := s.request(t, 2, 1)
	first, err := s.p.Launch(ctx(t), req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	second, err := s.p.Launch(ctx(t), req)
	if err != nil {
		t.Fatalf("Launch again with the same token: %v", err)
	}
	if diff := cmp.Diff(sorted(ids(first)), sorted(ids(second))); diff != "" {
		t.Errorf("same token, different instances (-first +second):\n%s", diff)
	}
	if live := s.live(t); len(live) != 2 {
		t.Errorf("%d live instances after launching the same token twice, want 2: %v", len(live), ids(live))
	}
	// A new attempt is a new token: it launches.
	next, err := s.p.Launch(ctx(t), s.request(t, 1, 2))
	if err != nil {
		t.Fatalf("Launch attempt 2: %v", err)
	}
	if len(next) != 1 || slices.Contains(ids(first), next[0].ID) {
		t.Errorf("attempt 2 got %v, want one new instance", ids(next))
	}
}

func testTokenMismatch(t *testing.T, s *suite) {
	req := s.request(t, 1, 1)
	if _, err := s.p.Launch(ctx(t), req); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	req.Count = 3
	_, err := s.p.Launch(ctx(t), req)
	if !errors.Is(err, providers.ErrInvalid) || providers.Retryable(err) {
		t.Errorf("token reused with another count: err %v, want non-retryable ErrInvalid", err)
	}
	if live := s.live(t); len(live) != 1 {
		t.Errorf("%d live instances, want 1", len(live))
	}
}

func testTerminateTwice(t *testing.T, s *suite) {
	got, err := s.p.Launch(ctx(t), s.request(t, 1, 1))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	for i := range 3 {
		if err := s.p.Terminate(ctx(t), ids(got)); err != nil {
			t.Fatalf("Terminate #%d: %v", i+1, err)
		}
	}
	if err := s.p.Terminate(ctx(t), nil); err != nil {
		t.Errorf("Terminate(nil): %v", err)
	}
	if live := s.live(t); len(live) != 0 {
		t.Errorf("live after Terminate: %v", ids(live))
	}
}

func testInvalid(t *testing.T, s *suite) {
	good := s.request(t, 1, 1)
	tests := map[string]func(r *providers.LaunchRequest){
		"zero count":           func(r *providers.LaunchRequest) { r.Count = 0 },
		"no token":             func(r *providers.LaunchRequest) { r.Token = "" },
		"unknown type":         func(r *providers.LaunchRequest) { r.Offer.InstanceType, r.Offer.Pool = "no-such-type", "no-such-pool" },
		"reserved tag":         func(r *providers.LaunchRequest) { r.Tags = map[string]string{providers.TagJob: "x"} },
		"min count over count": func(r *providers.LaunchRequest) { r.MinCount = 2 },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			req := good
			mutate(&req)
			_, err := s.p.Launch(ctx(t), req)
			if !errors.Is(err, providers.ErrInvalid) || providers.Retryable(err) {
				t.Errorf("err %v, want non-retryable ErrInvalid", err)
			}
		})
	}
	if live := s.live(t); len(live) != 0 {
		t.Errorf("invalid requests launched %v", ids(live))
	}
}

func testNoCapacity(t *testing.T, s *suite) {
	req := s.request(t, 2, 1)
	s.ctl.NoCapacity()
	_, err := s.p.Launch(ctx(t), req)
	if !errors.Is(err, providers.ErrNoCapacity) {
		t.Fatalf("err %v, want ErrNoCapacity", err)
	}
	if providers.Retryable(err) {
		t.Errorf("ErrNoCapacity is retryable; the caller should try another offer")
	}
	if got := providers.Reason(err); got != "NoCapacity" {
		t.Errorf("Reason = %q, want NoCapacity", got)
	}
	if live := s.live(t); len(live) != 0 {
		t.Errorf("a launch without capacity left %v", ids(live))
	}
}

func testThrottled(t *testing.T, s *suite) {
	req := s.request(t, 2, 1)
	s.ctl.Throttle()
	_, err := s.p.Launch(ctx(t), req)
	if !errors.Is(err, providers.ErrThrottled) || !providers.Retryable(err) {
		t.Fatalf("err %v, want retryable ErrThrottled", err)
	}
	got, err := s.p.Launch(ctx(t), req)
	if err != nil {
		t.Fatalf("retry after throttling: %v", err)
	}
	if live := s.live(t); len(got) != 2 || len(live) != 2 {
		t.Errorf("retry got %d, %d live; want 2 and 2", len(got), len(live))
	}
}

func testTimeoutRetry(t *testing.T, s *suite) {
	req := s.request(t, 2, 1)
	s.ctl.HangNextLaunch()
	short, cancel := context.WithTimeout(t.Context(), hangTimeout)
	defer cancel()
	_, err := s.p.Launch(short, req)
	if err == nil {
		t.Fatal("a launch that never answers returned no error")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !providers.Retryable(err) {
		t.Errorf("err %v, want a retryable context.DeadlineExceeded", err)
	}
	got, err := s.p.Launch(ctx(t), req)
	if err != nil {
		t.Fatalf("retry with the same token: %v", err)
	}
	live := s.live(t)
	if len(got) != 2 || len(live) != 2 {
		t.Errorf("retry got %v, live %v; want the same 2 (no double launch)", ids(got), ids(live))
	}
	if diff := cmp.Diff(sorted(ids(got)), sorted(ids(live))); diff != "" {
		t.Errorf("retry and ListByTag disagree (-retry +live):\n%s", diff)
	}
}

func testPartial(t *testing.T, s *suite) {
	req := s.request(t, 4, 1)
	req.MinCount = 1
	s.ctl.LimitLaunches(2)
	got, err := s.p.Launch(ctx(t), req)
	if err != nil {
		t.Fatalf("Launch 4, min 1, with room for 2: %v", err)
	}
	if len(got) != 2 {
		t.Errorf("asked 4, room for 2: got %d instances %v", len(got), ids(got))
	}
	if live := s.live(t); len(live) != len(got) {
		t.Errorf("Launch reported %d, %d live", len(got), len(live))
	}
	// The same token again reports the same partial launch.
	again, err := s.p.Launch(ctx(t), req)
	if err != nil {
		t.Fatalf("Launch again: %v", err)
	}
	if diff := cmp.Diff(sorted(ids(got)), sorted(ids(again))); diff != "" {
		t.Errorf("relaunch of a partial launch (-first +again):\n%s", diff)
	}
}

func testAllOrNothing(t *testing.T, s *suite) {
	req := s.request(t, 4, 1)
	s.ctl.LimitLaunches(2)
	_, err := s.p.Launch(ctx(t), req)
	if !errors.Is(err, providers.ErrNoCapacity) {
		t.Fatalf("a gang of 4 with room for 2: err %v, want ErrNoCapacity", err)
	}
	if live := s.live(t); len(live) != 0 {
		t.Errorf("a failed gang launch left %v", ids(live))
	}
}
