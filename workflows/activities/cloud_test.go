package activities_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/fake"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/activities"
)

// view is a capacity view with a node list tests change as they go.
type view struct {
	mu      sync.Mutex
	nodes   map[string]gangway.NodeStatus
	removed []string
	fail    error // returned by the next Nodes call
}

func newView() *view { return &view{nodes: map[string]gangway.NodeStatus{}} }

func (v *view) register(id, state string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.nodes[id] = gangway.NodeStatus{Node: gangway.Node{ID: id}, State: state}
}

func (v *view) Nodes(context.Context) ([]gangway.NodeStatus, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.fail; err != nil {
		v.fail = nil
		return nil, err
	}
	var out []gangway.NodeStatus
	for _, n := range v.nodes {
		out = append(out, n)
	}
	return out, nil
}

func (v *view) RemoveNode(_ context.Context, id string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	n, ok := v.nodes[id]
	switch {
	case !ok:
		return fmt.Errorf("remove node %s: %w", id, capacity.ErrNotFound)
	case len(n.Allocated) > 0:
		return fmt.Errorf("remove node %s: %w", id, capacity.ErrNodeBusy)
	}
	delete(v.nodes, id)
	v.removed = append(v.removed, id)
	return nil
}

// lossy launches for real, then loses the answer: a launch that took
// effect although the caller saw a failure.
type lossy struct{ *fake.Provider }

func (l lossy) Launch(ctx context.Context, req providers.LaunchRequest) ([]providers.Instance, error) {
	if _, err := l.Provider.Launch(ctx, req); err != nil {
		return nil, err
	}
	return nil, errors.New("read tcp 10.0.0.1:443: connection reset by peer")
}

func newFake(t *testing.T) *fake.Provider {
	t.Helper()
	p, err := fake.New(fake.Options{Pools: []fake.Pool{
		{Name: "a100-spot", Zone: "z1", InstanceType: "a100x8", GPUModel: "A100", GPUs: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 12},
		{Name: "a100-od", Zone: "z1", InstanceType: "a100x8", GPUModel: "A100", GPUs: 8, CapacityType: gangway.CapacityOnDemand, PricePerHour: 32},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func provisionInput(job string, attempt, count int) workflows.ProvisionInput {
	return workflows.ProvisionInput{
		JobID: job, Attempt: attempt, Team: "vision", Project: "resnet",
		Token: providers.Token(job, attempt),
		Offer: gangway.BurstOffer{Offer: gangway.Offer{Provider: "fake", Pool: "a100-spot", Zone: "z1", InstanceType: "a100x8",
			GPUModel: "A100", GPUsPerInstance: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 12}, Count: count},
	}
}

type env struct {
	act  *testsuite.TestActivityEnvironment
	view *view
	reg  *prometheus.Registry
}

func newEnv(t *testing.T, ps activities.ProviderSource) env {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	e := env{act: s.NewTestActivityEnvironment(), view: newView(), reg: prometheus.NewRegistry()}
	c := &activities.Cloud{Providers: ps, Nodes: e.view, Metrics: metrics.NewCloud(e.reg), PollInterval: 5 * time.Millisecond,
		Join: providers.Join{TemporalAddress: "temporal.internal:7233", FakeGPUs: true}}
	c.Register(e.act)
	return e
}

func (e env) provision(in workflows.ProvisionInput) (workflows.ProvisionResult, error) {
	var out workflows.ProvisionResult
	v, err := e.act.ExecuteActivity(workflows.ActivityProvision, in)
	if err == nil {
		err = v.Get(&out)
	}
	return out, err
}

func (e env) terminate(in workflows.TerminateInput) (int, error) {
	var n int
	v, err := e.act.ExecuteActivity(workflows.ActivityTerminate, in)
	if err == nil {
		err = v.Get(&n)
	}
	return n, err
}

func (e env) await(in workflows.AwaitNodesInput) (workflows.AwaitNodesResult, error) {
	var out workflows.AwaitNodesResult
	v, err := e.act.ExecuteActivity(workflows.ActivityAwaitNodes, in)
	if err == nil {
		err = v.Get(&out)
	}
	return out, err
}

func liveByToken(t *testing.T, p providers.Provider, token string) []string {
	t.Helper()
	insts, err := p.ListByTag(t.Context(), providers.TagToken, token)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range insts {
		ids = append(ids, in.ID)
	}
	return ids
}

func TestProvisionIsIdempotent(t *testing.T) {
	p := newFake(t)
	e := newEnv(t, activities.ProviderMap{"fake": p})
	in := provisionInput("train", 1, 2)
	first, err := e.provision(in)
	if err != nil {
		t.Fatal(err)
	}
	want := workflows.ProvisionResult{Instances: []workflows.Instance{
		{Provider: "fake", ID: "fake-000001", NodeID: "fake-000001"},
		{Provider: "fake", ID: "fake-000002", NodeID: "fake-000002"},
	}}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("first provision (-want +got):\n%s", diff)
	}
	again, err := e.provision(in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("second provision with the same token differs (-first +second):\n%s", diff)
	}
	if ids := liveByToken(t, p, in.Token); len(ids) != 2 {
		t.Errorf("instances with the token: %v, want 2", ids)
	}
	// The launch carried the job's tags and a boot script for the agent.
	insts, _ := p.Describe(t.Context(), []string{"fake-000001"})
	tags := insts[0].Tags
	wantTags := map[string]string{"team": "vision", "project": "resnet", providers.TagJob: "train",
		providers.TagAttempt: "1", providers.TagToken: in.Token, providers.TagPool: "a100-spot"}
	if diff := cmp.Diff(wantTags, tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	if ud, _ := p.UserData("fake-000001"); !strings.Contains(ud, "temporal.internal:7233") || !strings.Contains(ud, "--fake-gpus 8xA100") {
		t.Errorf("boot script does not join the control plane:\n%s", ud)
	}
	want2 := `
# HELP gangway_cloud_instances_launched_total Cloud instances launched for bursts, by provider, pool and capacity type.
# TYPE gangway_cloud_instances_launched_total counter
gangway_cloud_instances_launched_total{capacity_type="spot",pool="a100-spot",provider="fake"} 2
`
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want2), "gangway_cloud_instances_launched_total"); err != nil {
		t.Errorf("an adopted launch was counted again: %v", err)
	}
}

// TestProvisionAfterALostAnswer: the first try launched but saw an error
// (retryable); the retry adopts the instances instead of launching more.
func TestProvisionAfterALostAnswer(t *testing.T) {
	p := newFake(t)
	in := provisionInput("train", 1, 2)
	_, err := newEnv(t, activities.ProviderMap{"fake": lossy{p}}).provision(in)
	if typ, retryable := appError(t, err); typ != activities.ErrTypeCloudTransient || !retryable {
		t.Fatalf("lost answer: type %q retryable %t, want %s retryable", typ, retryable, activities.ErrTypeCloudTransient)
	}
	got, err := newEnv(t, activities.ProviderMap{"fake": p}).provision(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Instances) != 2 || len(liveByToken(t, p, in.Token)) != 2 {
		t.Errorf("retry got %d instances, cloud has %d; want 2 and 2", len(got.Instances), len(liveByToken(t, p, in.Token)))
	}
}

// appError returns the type and retryability of the application error
// inside err.
func appError(t *testing.T, err error) (string, bool) {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an application error", err, err)
	}
	return ae.Type(), !ae.NonRetryable()
}

func TestProvisionErrors(t *testing.T) {
	tests := map[string]struct {
		setup         func(p *fake.Provider)
		change        func(in *workflows.ProvisionInput)
		wantType      string
		wantRetryable bool
		wantMsg       string
	}{
		"no capacity": {
			setup:    func(p *fake.Provider) { _ = p.SetCapacity("a100-spot", 1) },
			wantType: activities.ErrTypeNoCapacity, wantMsg: "provision 2 × a100x8 in a100-spot for train attempt 1",
		},
		"quota": {
			setup: func(p *fake.Provider) {
				p.FailNext(fake.OpLaunch, fmt.Errorf("%w: VcpuLimitExceeded", providers.ErrQuota))
			},
			wantType: activities.ErrTypeQuota,
		},
		"price too low": {
			change:   func(in *workflows.ProvisionInput) { in.MaxPricePerHour = 10 },
			wantType: activities.ErrTypePriceTooLow,
		},
		"auth": {
			setup: func(p *fake.Provider) {
				p.FailNext(fake.OpLaunch, fmt.Errorf("%w: UnauthorizedOperation", providers.ErrAuth))
			},
			wantType: activities.ErrTypeAuth,
		},
		"invalid request": {
			change:   func(in *workflows.ProvisionInput) { in.Offer.Count = 0 },
			wantType: activities.ErrTypeInvalid, wantMsg: "count must be positive",
		},
		"pool the provider does not have": {
			change:   func(in *workflows.ProvisionInput) { in.Offer.Pool = "h100-spot" },
			wantType: activities.ErrTypeInvalid,
		},
		"provider not configured": {
			change:   func(in *workflows.ProvisionInput) { in.Offer.Provider = "aws" },
			wantType: activities.ErrTypeInvalid, wantMsg: `cloud provider "aws" is not configured`,
		},
		"throttled": {
			setup: func(p *fake.Provider) {
				p.FailNext(fake.OpLaunch, fmt.Errorf("%w: RequestLimitExceeded", providers.ErrThrottled))
			},
			wantType:      activities.ErrTypeThrottled,
			wantRetryable: true,
		},
		"transient": {
			setup:         func(p *fake.Provider) { p.FailNext(fake.OpLaunch, errors.New("500 internal error")) },
			wantType:      activities.ErrTypeCloudTransient,
			wantRetryable: true, wantMsg: "500 internal error",
		},
		"deadline": {
			setup:         func(p *fake.Provider) { p.FailNext(fake.OpLaunch, context.DeadlineExceeded) },
			wantType:      activities.ErrTypeCloudTransient,
			wantRetryable: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := newFake(t)
			if tc.setup != nil {
				tc.setup(p)
			}
			in := provisionInput("train", 1, 2)
			if tc.change != nil {
				tc.change(&in)
			}
			_, err := newEnv(t, activities.ProviderMap{"fake": p}).provision(in)
			if err == nil {
				t.Fatal("provision succeeded")
			}
			typ, retryable := appError(t, err)
			if typ != tc.wantType || retryable != tc.wantRetryable {
				t.Errorf("type %q retryable %t, want %q %t (%v)", typ, retryable, tc.wantType, tc.wantRetryable, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantMsg)
			}
			if !tc.wantRetryable {
				if ids := liveByToken(t, p, in.Token); len(ids) != 0 {
					t.Errorf("a refused launch left instances: %v", ids)
				}
			}
		})
	}
}

func TestAwaitNodes(t *testing.T) {
	e := newEnv(t, activities.ProviderMap{})
	var mu sync.Mutex
	var beats []int
	e.act.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var ready int
		if err := details.Get(&ready); err != nil {
			t.Errorf("heartbeat details: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		beats = append(beats, ready)
	})
	e.view.register("n1", gangway.NodeReady)
	e.view.register("n2", gangway.NodeLost) // lost counts as not there
	e.view.fail = errors.New("redis: connection refused")
	go func() {
		time.Sleep(50 * time.Millisecond)
		e.view.register("n2", gangway.NodeReady)
		e.view.register("n3", gangway.NodeCordoned)
	}()
	got, err := e.await(workflows.AwaitNodesInput{NodeIDs: []string{"n1", "n2", "n3"}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got.ReadyAt.IsZero() {
		t.Error("ReadyAt not set")
	}
	mu.Lock()
	defer mu.Unlock()
	// The test environment passes on the first heartbeat and throttles
	// the rest, as the SDK does.
	if len(beats) == 0 || beats[0] != 0 {
		t.Errorf("heartbeats %v: want 0 ready first (the view unreadable)", beats)
	}

	if _, err := e.await(workflows.AwaitNodesInput{}); err != nil {
		t.Errorf("no nodes to wait for: %v", err)
	}
}

func TestAwaitNodesTimeout(t *testing.T) {
	e := newEnv(t, activities.ProviderMap{})
	e.view.register("n1", gangway.NodeReady)
	start := time.Now()
	_, err := e.await(workflows.AwaitNodesInput{NodeIDs: []string{"n1", "n2", "n3"}, Timeout: 30 * time.Millisecond})
	if typ, retryable := appError(t, err); typ != workflows.ErrTypeNodesNotReady || retryable {
		t.Errorf("type %q retryable %t, want %s non-retryable", typ, retryable, workflows.ErrTypeNodesNotReady)
	}
	if !strings.Contains(err.Error(), "2 of 3 nodes did not register within 30ms: [n2 n3]") {
		t.Errorf("error %q does not name the missing nodes", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v to time out after 30ms", d)
	}
}

func TestTerminate(t *testing.T) {
	p := newFake(t)
	e := newEnv(t, activities.ProviderMap{"fake": p})
	in := provisionInput("train", 1, 2)
	res, err := e.provision(in)
	if err != nil {
		t.Fatal(err)
	}
	e.view.register("fake-000001", gangway.NodeReady)
	e.view.register("fake-000002", gangway.NodeReady)
	e.view.register("onprem-1", gangway.NodeReady)
	term := workflows.TerminateInput{Provider: "fake", Token: in.Token, JobID: "train",
		NodeIDs: []string{res.Instances[0].NodeID}}

	n, err := e.terminate(term)
	if err != nil || n != 2 {
		t.Fatalf("terminate = %d, %v; want 2, nil", n, err)
	}
	if ids := liveByToken(t, p, in.Token); len(ids) != 0 {
		t.Errorf("instances left: %v", ids)
	}
	// Both nodes went, the one named and the one found by its instance.
	if diff := cmp.Diff([]string{"fake-000001", "fake-000002"}, e.view.removed); diff != "" {
		t.Errorf("removed nodes (-want +got):\n%s", diff)
	}

	n, err = e.terminate(term)
	if err != nil || n != 0 {
		t.Errorf("terminate again = %d, %v; want 0, nil", n, err)
	}
	want := `
# HELP gangway_cloud_instances_terminated_total Cloud instances Gangway terminated, by provider, pool and reason (released, orphan).
# TYPE gangway_cloud_instances_terminated_total counter
gangway_cloud_instances_terminated_total{pool="a100-spot",provider="fake",reason="released"} 2
`
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "gangway_cloud_instances_terminated_total"); err != nil {
		t.Error(err)
	}
}

// TestTerminateAfterAPartialLaunch: the launch took effect but Provision
// failed, so the workflow knows no instance or node; the token finds them.
func TestTerminateAfterAPartialLaunch(t *testing.T) {
	p := newFake(t)
	in := provisionInput("train", 2, 3)
	if _, err := newEnv(t, activities.ProviderMap{"fake": lossy{p}}).provision(in); err == nil {
		t.Fatal("lossy provision succeeded")
	}
	e := newEnv(t, activities.ProviderMap{"fake": p})
	e.view.register("fake-000002", gangway.NodeReady) // one agent made it
	n, err := e.terminate(workflows.TerminateInput{Provider: "fake", Token: in.Token, JobID: "train"})
	if err != nil || n != 3 {
		t.Fatalf("terminate = %d, %v; want 3, nil", n, err)
	}
	if ids := liveByToken(t, p, in.Token); len(ids) != 0 {
		t.Errorf("instances left: %v", ids)
	}
	if diff := cmp.Diff([]string{"fake-000002"}, e.view.removed); diff != "" {
		t.Errorf("removed nodes (-want +got):\n%s", diff)
	}
}

func TestTerminateRefusals(t *testing.T) {
	p := newFake(t)
	e := newEnv(t, activities.ProviderMap{"fake": p})
	other, err := e.provision(provisionInput("other-job", 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	busy := gangway.NodeStatus{Node: gangway.Node{ID: "busy"}, State: gangway.NodeReady, Allocated: map[int]gangway.JobID{0: "train"}}
	e.view.nodes["busy"] = busy

	tests := map[string]struct {
		in            workflows.TerminateInput
		wantType      string // "" = success
		wantRetryable bool
	}{
		"no token would match every launch": {in: workflows.TerminateInput{Provider: "fake", JobID: "train"}, wantType: activities.ErrTypeInvalid},
		"unknown provider":                  {in: workflows.TerminateInput{Provider: "gcp", Token: "gw-1"}, wantType: activities.ErrTypeInvalid},
		"another job's token":               {in: workflows.TerminateInput{Provider: "fake", Token: providers.Token("other-job", 1), JobID: "train"}},
		"a busy node stays":                 {in: workflows.TerminateInput{Provider: "fake", Token: "gw-none", NodeIDs: []string{"busy", "gone"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n, err := e.terminate(tc.in)
			if tc.wantType == "" {
				if err != nil || n != 0 {
					t.Errorf("terminate = %d, %v; want 0, nil", n, err)
				}
				return
			}
			if typ, retryable := appError(t, err); typ != tc.wantType || retryable != tc.wantRetryable {
				t.Errorf("type %q retryable %t, want %q %t", typ, retryable, tc.wantType, tc.wantRetryable)
			}
		})
	}
	if ids := liveByToken(t, p, providers.Token("other-job", 1)); len(ids) != 1 || ids[0] != other.Instances[0].ID {
		t.Errorf("another job's instance was touched: %v", ids)
	}
	if _, ok := e.view.nodes["busy"]; !ok {
		t.Error("a node holding a job's GPUs was removed")
	}

	p.FailNext(fake.OpTerminate, fmt.Errorf("%w: rate", providers.ErrThrottled))
	_, err = e.terminate(workflows.TerminateInput{Provider: "fake", Token: providers.Token("other-job", 1)})
	if typ, retryable := appError(t, err); typ != activities.ErrTypeThrottled || !retryable {
		t.Errorf("throttled terminate: type %q retryable %t, want Throttled, retryable", typ, retryable)
	}
}

// The real capacity view and provider registry are what the server wires.
var (
	_ activities.Nodes          = (*capacity.View)(nil)
	_ activities.ProviderSource = (*cloud.Registry)(nil)
)

// signer is a launch token signer that records what it signed.
type signer struct{ pools, launches []string }

func (s *signer) LaunchToken(pool, launch string, count int, expires time.Time) (string, error) {
	s.pools, s.launches = append(s.pools, pool), append(s.launches, launch)
	return fmt.Sprintf("gwl.%s.%s.%d.%d", pool, launch, count, expires.Unix()), nil
}

// TestProvisionSignsAOneUseJoinToken: with join tokens configured, the
// boot data carries a one-use token for the launch, the same on a retry.
func TestProvisionSignsAOneUseJoinToken(t *testing.T) {
	p := newFake(t)
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	act := s.NewTestActivityEnvironment()
	sg := &signer{}
	(&activities.Cloud{Providers: activities.ProviderMap{"fake": p}, Nodes: newView(), Metrics: metrics.NewCloud(prometheus.NewRegistry()),
		Join: providers.Join{TemporalAddress: "temporal.internal:7233"}, JoinTokens: sg}).Register(act)
	in := provisionInput("train", 1, 2)
	in.JoinBy = time.Date(2026, 5, 1, 12, 30, 0, 0, time.UTC)
	for range 2 {
		if _, err := act.ExecuteActivity(workflows.ActivityProvision, in); err != nil {
			t.Fatal(err)
		}
	}
	want := fmt.Sprintf("export GANGWAY_JOIN_TOKEN=gwl.a100-spot.%s.2.%d\n", in.Token, in.JoinBy.Unix())
	if ud, _ := p.UserData("fake-000001"); !strings.Contains(ud, want) {
		t.Errorf("boot script lacks %q:\n%s", want, ud)
	}
	if len(sg.launches) != 2 || sg.launches[0] != sg.launches[1] {
		t.Errorf("signed %v, want the launch token twice, the same", sg.launches)
	}
}
