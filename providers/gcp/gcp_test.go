package gcp_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	compute "cloud.google.com/go/compute/apiv1"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/gcp"
	"github.com/gangwayhq/gangway/providers/internal/gcefake"
	"github.com/gangwayhq/gangway/providers/providertest"
)

var (
	machineTypes = []gcp.MachineType{
		{Name: "a2-highgpu-1g", GPUModel: "A100", GPUs: 1, InterruptionRate: 0.03},
		{Name: "n1-standard-8", GPUModel: "V100", GPUs: 1, Accelerator: "nvidia-tesla-v100", InterruptionRate: 0.05},
	}
	prices = []gcp.Price{
		{MachineType: "a2-highgpu-1g", Region: "us-central1", Spot: 1.47, OnDemand: 3.67},
		{MachineType: "n1-standard-8", Region: "us-central1", Spot: 0.95, OnDemand: 2.86},
		{MachineType: "n1-standard-8", Region: "europe-west4", Spot: 1.05},
	}
)

func start(t *testing.T) (*gcefake.Server, *gcp.Provider) {
	srv := gcefake.Start(t, gcefake.New())
	client, err := compute.NewInstancesRESTClient(context.Background(), option.WithEndpoint(srv.URL), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	p, err := gcp.New(client, gcp.Options{Project: "gangway-test", Zones: []string{"us-central1-a", "us-central1-b", "europe-west4-a"},
		MachineTypes: machineTypes, Prices: prices, Image: "projects/deeplearning-platform-release/global/images/family/common-cu124",
		Subnetwork: "regions/us-central1/subnetworks/gpu", ServiceAccount: "node@gangway-test.iam.gserviceaccount.com"})
	if err != nil {
		t.Fatal(err)
	}
	return srv, p
}

type controller struct{ s *gcefake.Server }

func (c controller) NoCapacity() {
	c.s.Inject(gcefake.Fault{Kind: "insert", Status: http.StatusServiceUnavailable, OpCode: "ZONE_RESOURCE_POOL_EXHAUSTED",
		Message: "The zone 'projects/gangway-test/zones/us-central1-a' does not have enough resources available to fulfill the request."})
}
func (c controller) Throttle() {
	c.s.Inject(gcefake.Fault{Status: http.StatusTooManyRequests, Reason: "rateLimitExceeded", Message: "Rate Limit Exceeded"})
}
func (c controller) HangNextLaunch()     { c.s.Inject(gcefake.Fault{Kind: "insert", Hang: true}) }
func (c controller) LimitLaunches(n int) { c.s.LimitLaunches(n) }
func (c controller) Reset()              { c.s.Reset() }

func TestConformance(t *testing.T) {
	srv, p := start(t)
	providertest.Run(t, func(*testing.T) providers.Provider { return p }, controller{srv})
}

func TestOffers(t *testing.T) {
	_, p := start(t)
	offers, err := p.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range offers {
		got = append(got, o.Pool+" "+o.Region+" $"+strconv.FormatFloat(o.PricePerHour, 'f', -1, 64)+" "+strconv.FormatFloat(o.InterruptionRate, 'f', -1, 64))
	}
	want := []string{
		"gcp-us-central1-a-a2-highgpu-1g-spot us-central1 $1.47 0.03",
		"gcp-us-central1-a-a2-highgpu-1g-on-demand us-central1 $3.67 0",
		"gcp-us-central1-b-a2-highgpu-1g-spot us-central1 $1.47 0.03",
		"gcp-us-central1-b-a2-highgpu-1g-on-demand us-central1 $3.67 0",
		"gcp-us-central1-a-n1-standard-8-spot us-central1 $0.95 0.05",
		"gcp-us-central1-a-n1-standard-8-on-demand us-central1 $2.86 0",
		"gcp-us-central1-b-n1-standard-8-spot us-central1 $0.95 0.05",
		"gcp-us-central1-b-n1-standard-8-on-demand us-central1 $2.86 0",
		"gcp-europe-west4-a-n1-standard-8-spot europe-west4 $1.05 0.05",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}
}

func offer(t *testing.T, p *gcp.Provider, pool string) gangway.Offer {
	t.Helper()
	offers, err := p.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offers {
		if o.Pool == pool {
			return o
		}
	}
	t.Fatalf("no offer %s", pool)
	return gangway.Offer{}
}

// TestInsertRequest checks what goes on the wire: spot scheduling with
// DELETE on preemption, labels, the startup script, the machine and
// accelerator types, and a requestId per instance derived from the token.
func TestInsertRequest(t *testing.T) {
	tests := map[string]struct {
		pool           string
		wantScheduling map[string]any
		wantAccel      bool
	}{
		"spot with built-in GPUs": {
			pool:           "gcp-us-central1-a-a2-highgpu-1g-spot",
			wantScheduling: map[string]any{"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE", "onHostMaintenance": "TERMINATE", "automaticRestart": false},
		},
		"standard with an attached V100": {
			pool:           "gcp-us-central1-b-n1-standard-8-on-demand",
			wantScheduling: map[string]any{"provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE", "automaticRestart": true},
			wantAccel:      true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv, p := start(t)
			o := offer(t, p, tc.pool)
			req := providers.LaunchRequest{Offer: o, Count: 2, Token: providers.Token("wire", 2), JobID: "wire", Attempt: 2,
				Join: providers.Join{TemporalAddress: "t:7233", RedisURL: "redis://:pw@r:6379", FakeGPUs: true},
				Tags: map[string]string{"team": "Vision Research"}}
			ins, err := p.Launch(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			bodies := srv.Inserts()
			if len(bodies) != 2 {
				t.Fatalf("%d inserts, want 2", len(bodies))
			}
			b := bodies[0]
			if diff := cmp.Diff(tc.wantScheduling, b["scheduling"]); diff != "" {
				t.Errorf("scheduling (-want +got):\n%s", diff)
			}
			wantLabels := map[string]any{providers.TagJob: "wire", providers.TagAttempt: "2", providers.TagToken: req.Token, "gangway-count": "2",
				providers.TagPool: tc.pool, "team": "vision_research"}
			if diff := cmp.Diff(wantLabels, b["labels"]); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if got, want := b["name"], req.Token+"-0"; got != want {
				t.Errorf("name %v, want %v", got, want)
			}
			if got, want := b["machineType"], "zones/"+o.Zone+"/machineTypes/"+o.InstanceType; got != want {
				t.Errorf("machineType %v, want %v", got, want)
			}
			_, hasAccel := b["guestAccelerators"]
			if hasAccel != tc.wantAccel {
				t.Errorf("guestAccelerators %v, want present %v", b["guestAccelerators"], tc.wantAccel)
			}
			items := b["metadata"].(map[string]any)["items"].([]any)
			script := items[0].(map[string]any)["value"].(string)
			for _, s := range []string{"--node-id \"$NODE_ID\"", "computeMetadata/v1/instance/name", "--pool " + tc.pool, "--fake-gpus 1x"} {
				if !strings.Contains(script, s) {
					t.Errorf("startup-script lacks %q:\n%s", s, script)
				}
			}
			if len(ins) != 2 || ins[0].NodeID != req.Token+"-0" || ins[0].ID != o.Zone+"/"+req.Token+"-0" {
				t.Errorf("instances %+v", ins)
			}
			if ins[0].PrivateIP == "" || ins[0].LaunchedAt.IsZero() {
				t.Errorf("instance lacks IP or launch time: %+v", ins[0])
			}
		})
	}
}

func TestRequestIDs(t *testing.T) {
	a, b := providers.TokenUUID(providers.Token("j", 1), 0), providers.TokenUUID(providers.Token("j", 1), 1)
	if a == b || a != providers.RequestUUID("j", 1) {
		t.Errorf("per-instance request IDs %s, %s; RequestUUID %s", a, b, providers.RequestUUID("j", 1))
	}
}

// TestErrorMapping sends googleapi errors and failed operations through
// the real client.
func TestErrorMapping(t *testing.T) {
	tests := map[string]struct {
		fault         gcefake.Fault
		want          error
		wantRetryable bool
	}{
		"stockout in the operation": {fault: gcefake.Fault{Kind: "insert", Status: 503, OpCode: "ZONE_RESOURCE_POOL_EXHAUSTED"}, want: providers.ErrNoCapacity},
		"stockout with details":     {fault: gcefake.Fault{Kind: "insert", Status: 503, OpCode: "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"}, want: providers.ErrNoCapacity},
		"stockout answered at once": {fault: gcefake.Fault{Kind: "insert", Status: 503, Reason: "backendError",
			Message: "The zone 'projects/p/zones/z' does not have enough resources available to fulfill the request."}, want: providers.ErrNoCapacity},
		"quota in the operation": {fault: gcefake.Fault{Kind: "insert", Status: 403, OpCode: "QUOTA_EXCEEDED", Message: "Quota 'NVIDIA_A100_GPUS' exceeded. Limit: 0.0 in region us-central1."}, want: providers.ErrQuota},
		"quota answered at once": {fault: gcefake.Fault{Kind: "insert", Status: 403, Reason: "quotaExceeded", Message: "Quota exceeded"}, want: providers.ErrQuota},
		"429":                    {fault: gcefake.Fault{Kind: "insert", Status: 429, Reason: "rateLimitExceeded", Message: "Rate Limit Exceeded"}, want: providers.ErrThrottled, wantRetryable: true},
		"403 rate limit":         {fault: gcefake.Fault{Kind: "insert", Status: 403, Reason: "userRateLimitExceeded", Message: "User Rate Limit Exceeded"}, want: providers.ErrThrottled, wantRetryable: true},
		"401":                    {fault: gcefake.Fault{Kind: "insert", Status: 401, Reason: "authError", Message: "Invalid Credentials"}, want: providers.ErrAuth},
		"403 forbidden":          {fault: gcefake.Fault{Kind: "insert", Status: 403, Reason: "forbidden", Message: "Required 'compute.instances.create' permission"}, want: providers.ErrAuth},
		"400":                    {fault: gcefake.Fault{Kind: "insert", Status: 400, Reason: "invalid", Message: "Invalid value for field"}, want: providers.ErrInvalid},
		"500":                    {fault: gcefake.Fault{Kind: "insert", Status: 500, Reason: "backendError", Message: "Internal error"}, wantRetryable: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv, p := start(t)
			o := offer(t, p, "gcp-us-central1-a-a2-highgpu-1g-spot")
			srv.Inject(tc.fault)
			_, err := p.Launch(context.Background(), providers.LaunchRequest{Offer: o, Count: 1, Token: providers.Token("e", 1), JobID: "e", Attempt: 1})
			if err == nil {
				t.Fatal("no error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err %v, want %v", err, tc.want)
			}
			if got := providers.Retryable(err); got != tc.wantRetryable {
				t.Errorf("Retryable = %v, want %v (%v)", got, tc.wantRetryable, err)
			}
			var ge *googleapi.Error
			if !errors.As(err, &ge) {
				t.Errorf("the googleapi.Error is not reachable from %v", err)
			}
		})
	}
}

// TestPreemptedAndDeleted follows instances that GCE takes away: a spot VM
// is deleted on preemption, so it is stopping, then gone.
func TestPreemptedAndDeleted(t *testing.T) {
	srv, p := start(t)
	o := offer(t, p, "gcp-us-central1-a-a2-highgpu-1g-spot")
	ins, err := p.Launch(context.Background(), providers.LaunchRequest{Offer: o, Count: 2, Token: providers.Token("pre", 1), JobID: "pre", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv.Preempt(o.Zone, ins[0].NodeID)
	got, err := p.Describe(context.Background(), []string{ins[0].ID, ins[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].State != providers.Stopping || got[0].StateReason == "" || got[1].State != providers.Running {
		t.Errorf("after preemption: %+v", got)
	}
	got, _ = p.Describe(context.Background(), []string{ins[0].ID, ins[1].ID})
	if len(got) != 1 || got[0].ID != ins[1].ID {
		t.Errorf("the preempted VM should be gone: %+v", got)
	}
	if _, err := p.Describe(context.Background(), []string{"no-zone"}); !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("Describe(malformed) = %v, want ErrInvalid", err)
	}
	if err := p.Terminate(context.Background(), []string{ins[0].ID, ins[1].ID, "us-central1-a/never-was"}); err != nil {
		t.Errorf("Terminate with gone and unknown IDs: %v", err)
	}
}

func TestListPages(t *testing.T) {
	srv, p := start(t)
	srv.PageSize = 2
	o := offer(t, p, "gcp-us-central1-b-n1-standard-8-spot")
	if _, err := p.Launch(context.Background(), providers.LaunchRequest{Offer: o, Count: 5, Token: providers.Token("pages", 1), JobID: "pages", Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{"pages", ""} {
		got, err := p.ListByTag(context.Background(), providers.TagJob, value)
		if err != nil || len(got) != 5 {
			t.Errorf("ListByTag(job, %q): %d, %v; want 5", value, len(got), err)
		}
	}
}

func TestNewValidates(t *testing.T) {
	tests := map[string]struct {
		opts    gcp.Options
		wantErr string
	}{
		"no project": {opts: gcp.Options{Zones: []string{"z"}, Image: "i", MachineTypes: machineTypes}, wantErr: "project is required"},
		"no zones":   {opts: gcp.Options{Project: "p", Image: "i", MachineTypes: machineTypes}, wantErr: "zones"},
		"no image":   {opts: gcp.Options{Project: "p", Zones: []string{"z"}, MachineTypes: machineTypes}, wantErr: "image is required"},
		"price for an unknown type": {opts: gcp.Options{Project: "p", Zones: []string{"z"}, Image: "i", MachineTypes: machineTypes,
			Prices: []gcp.Price{{MachineType: "g2-standard-4", Region: "r", Spot: 1}}}, wantErr: "not in machineTypes"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := gcp.New(nil, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
