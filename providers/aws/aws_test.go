package aws_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/aws"
	"github.com/gangwayhq/gangway/providers/internal/ec2fake"
	"github.com/gangwayhq/gangway/providers/providertest"
)

var table = []aws.InstanceType{
	{Name: "p3.2xlarge", GPUModel: "V100", GPUs: 1, OnDemandPrice: 3.06, InterruptionRate: 0.01},
	{Name: "p4d.24xlarge", GPUModel: "A100", GPUs: 8, OnDemandPrice: 32.77, InterruptionRate: 0.02},
}

func start(t *testing.T) (*ec2fake.Server, *ec2.Client) {
	srv := ec2fake.Start(t, ec2fake.New(
		ec2fake.SpotPrice{Zone: "us-east-1a", InstanceType: "p3.2xlarge", Price: 0.918},
		ec2fake.SpotPrice{Zone: "us-east-1b", InstanceType: "p3.2xlarge", Price: 1.02},
		ec2fake.SpotPrice{Zone: "us-east-1a", InstanceType: "p4d.24xlarge", Price: 11.57},
		ec2fake.SpotPrice{Zone: "us-west-2a", InstanceType: "p3.2xlarge", Price: 0.9},
		ec2fake.SpotPrice{Zone: "us-east-1a", InstanceType: "g5.xlarge", Price: 0.4}, // not in the table
	))
	client := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: awssdk.String(srv.URL),
		Credentials: awssdk.AnonymousCredentials{}, RetryMaxAttempts: 1})
	return srv, client
}

func newProvider(t *testing.T, client *ec2.Client) *aws.Provider {
	p, err := aws.New(client, aws.Options{Region: "us-east-1", Zones: []string{"us-east-1a", "us-east-1b"},
		Subnets: map[string]string{"us-east-1b": "subnet-us-east-1b"}, ImageID: "ami-0123456789abcdef0",
		SecurityGroupIDs: []string{"sg-1"}, InstanceProfile: "gangway-node", InstanceTypes: table})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type controller struct{ s *ec2fake.Server }

func (c controller) NoCapacity() {
	c.s.Inject(ec2fake.Fault{Action: "RunInstances", Status: http.StatusInternalServerError, Code: "InsufficientInstanceCapacity",
		Message: "We currently do not have sufficient p3.2xlarge capacity in the Availability Zone you requested (us-east-1a)."})
}
func (c controller) Throttle() {
	c.s.Inject(ec2fake.Fault{Status: http.StatusServiceUnavailable, Code: "RequestLimitExceeded", Message: "Request limit exceeded."})
}
func (c controller) HangNextLaunch()     { c.s.Inject(ec2fake.Fault{Action: "RunInstances", Hang: true}) }
func (c controller) LimitLaunches(n int) { c.s.LimitLaunches(n) }
func (c controller) Reset()              { c.s.Reset() }

func TestConformance(t *testing.T) {
	srv, client := start(t)
	providertest.Run(t, func(t *testing.T) providers.Provider { return newProvider(t, client) }, controller{srv})
}

func TestOffers(t *testing.T) {
	_, client := start(t)
	offers, err := newProvider(t, client).Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Pool  string
		Price float64
		Rate  float64
	}
	var got []row
	for _, o := range offers {
		got = append(got, row{o.Pool, o.PricePerHour, o.InterruptionRate})
	}
	want := []row{
		{"aws-us-east-1a-p3-2xlarge-spot", 0.918, 0.01},
		{"aws-us-east-1a-p3-2xlarge-on-demand", 3.06, 0},
		{"aws-us-east-1b-p3-2xlarge-spot", 1.02, 0.01},
		{"aws-us-east-1b-p3-2xlarge-on-demand", 3.06, 0},
		{"aws-us-east-1a-p4d-24xlarge-spot", 11.57, 0.02},
		{"aws-us-east-1a-p4d-24xlarge-on-demand", 32.77, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}
	if got := offers[4].PricePerGPUHour(); got != 11.57/8 {
		t.Errorf("PricePerGPUHour = %v", got)
	}
}

// TestRunInstancesRequest checks what goes on the wire: the spot market
// options, the client token, the zone or subnet, the tags and the boot
// script.
func TestRunInstancesRequest(t *testing.T) {
	srv, client := start(t)
	p := newProvider(t, client)
	offers, err := p.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		offer gangway.Offer
		max   float64
		want  map[string]string
	}{
		"spot in a zone": {offer: offers[0], max: 1.5, want: map[string]string{
			"InstanceMarketOptions.MarketType":                               "spot",
			"InstanceMarketOptions.SpotOptions.SpotInstanceType":             "one-time",
			"InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior": "terminate",
			"InstanceMarketOptions.SpotOptions.MaxPrice":                     "1.5",
			"Placement.AvailabilityZone":                                     "us-east-1a",
			"SubnetId":                                                       "",
		}},
		"on-demand in a subnet": {offer: offers[3], want: map[string]string{
			"InstanceMarketOptions.MarketType": "",
			"Placement.AvailabilityZone":       "",
			"SubnetId":                         "subnet-us-east-1b",
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			job := "wire-" + strings.ReplaceAll(name, " ", "-")
			req := providers.LaunchRequest{Offer: tc.offer, Count: 2, MinCount: 1, Token: providers.Token(job, 3), JobID: job, Attempt: 3,
				MaxPricePerHour: tc.max, Join: providers.Join{TemporalAddress: "t:7233", RedisURL: "redis://:pw@r:6379", FakeGPUs: true}}
			ins, err := p.Launch(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests("RunInstances")
			form := reqs[len(reqs)-1]
			want := map[string]string{
				"ClientToken": req.Token, "MinCount": "1", "MaxCount": "2", "InstanceType": tc.offer.InstanceType,
				"ImageId": "ami-0123456789abcdef0", "SecurityGroupId.1": "sg-1", "IamInstanceProfile.Name": "gangway-node",
				"InstanceInitiatedShutdownBehavior": "terminate", "MetadataOptions.HttpTokens": "required",
				"TagSpecification.1.ResourceType": "instance", "TagSpecification.2.ResourceType": "volume",
			}
			for k, v := range tc.want {
				want[k] = v
			}
			got := map[string]string{}
			for k := range want {
				got[k] = form.Get(k)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("RunInstances form (-want +got):\n%s", diff)
			}
			tags := map[string]string{}
			for i := 1; form.Has("TagSpecification.1.Tag." + itoa(i) + ".Key"); i++ {
				tags[form.Get("TagSpecification.1.Tag."+itoa(i)+".Key")] = form.Get("TagSpecification.1.Tag." + itoa(i) + ".Value")
			}
			wantTags := map[string]string{providers.TagJob: job, providers.TagAttempt: "3", providers.TagToken: req.Token, providers.TagPool: tc.offer.Pool}
			if diff := cmp.Diff(wantTags, tags); diff != "" {
				t.Errorf("instance tags (-want +got):\n%s", diff)
			}
			script, _ := base64.StdEncoding.DecodeString(form.Get("UserData"))
			for _, s := range []string{"exec gangway agent --node-id \"$NODE_ID\"", "--pool " + tc.offer.Pool, "--fake-gpus 1xV100",
				"meta-data/instance-id", "export GANGWAY_REDIS_URL=redis://:pw@r:6379"} {
				if !strings.Contains(string(script), s) {
					t.Errorf("user data lacks %q:\n%s", s, script)
				}
			}
			if strings.Contains(strings.SplitN(string(script), "exec ", 2)[1], "pw@") {
				t.Errorf("the Redis password is on the agent's command line:\n%s", script)
			}
			if ins[0].CapacityType != tc.offer.CapacityType || ins[0].Zone != tc.offer.Zone {
				t.Errorf("instance %+v, offer %+v", ins[0], tc.offer)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestErrorMapping sends each EC2 error code through the real client and
// checks the sentinel, the retryability and that the SDK's error stays
// reachable.
func TestErrorMapping(t *testing.T) {
	srv, client := start(t)
	p := newProvider(t, client)
	offers, err := p.Offers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		status        int
		want          error
		wantRetryable bool
	}{
		"InsufficientInstanceCapacity": {status: 500, want: providers.ErrNoCapacity},
		"InsufficientCapacity":         {status: 500, want: providers.ErrNoCapacity},
		"UnfulfillableCapacity":        {status: 400, want: providers.ErrNoCapacity},
		"MaxSpotInstanceCountExceeded": {status: 400, want: providers.ErrQuota},
		"InstanceLimitExceeded":        {status: 400, want: providers.ErrQuota},
		"VcpuLimitExceeded":            {status: 400, want: providers.ErrQuota},
		"SpotMaxPriceTooLow":           {status: 400, want: providers.ErrPriceTooLow},
		"RequestLimitExceeded":         {status: 503, want: providers.ErrThrottled, wantRetryable: true},
		"AuthFailure":                  {status: 401, want: providers.ErrAuth},
		"UnauthorizedOperation":        {status: 403, want: providers.ErrAuth},
		"InvalidInstanceID.NotFound":   {status: 400, want: providers.ErrNotFound},
		"IdempotentParameterMismatch":  {status: 400, want: providers.ErrInvalid},
		"InternalError":                {status: 500, wantRetryable: true},
	}
	for code, tc := range tests {
		t.Run(code, func(t *testing.T) {
			srv.Inject(ec2fake.Fault{Action: "RunInstances", Status: tc.status, Code: code, Message: "injected"})
			_, err := p.Launch(context.Background(), providers.LaunchRequest{Offer: offers[0], Count: 1,
				Token: providers.Token("errors-"+strings.ToLower(code), 1), JobID: "errors", Attempt: 1})
			if err == nil {
				t.Fatal("no error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err %v, want %v", err, tc.want)
			}
			if got := providers.Retryable(err); got != tc.wantRetryable {
				t.Errorf("Retryable = %v, want %v (%v)", got, tc.wantRetryable, err)
			}
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode() != code {
				t.Errorf("the SDK's APIError with code %s is not reachable from %v", code, err)
			}
		})
	}
}

func TestSpotPriceTooLowFromServer(t *testing.T) {
	_, client := start(t)
	p := newProvider(t, client)
	offers, _ := p.Offers(context.Background())
	_, err := p.Launch(context.Background(), providers.LaunchRequest{Offer: offers[0], Count: 1, MaxPricePerHour: 0.5,
		Token: providers.Token("cheap", 1), JobID: "cheap", Attempt: 1})
	if !errors.Is(err, providers.ErrPriceTooLow) {
		t.Errorf("max $0.50 under a $0.918 spot price: %v, want ErrPriceTooLow", err)
	}
}

// TestTerminateUnknownAndPaging terminates a mix of live, gone and unknown
// IDs (EC2 fails the whole call for the unknown one) and lists across
// DescribeInstances pages.
func TestTerminateUnknownAndPaging(t *testing.T) {
	srv, client := start(t)
	srv.PageSize = 2
	p := newProvider(t, client)
	offers, _ := p.Offers(context.Background())
	ins, err := p.Launch(context.Background(), providers.LaunchRequest{Offer: offers[0], Count: 5, Token: providers.Token("page", 1), JobID: "page", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	listed, err := p.ListByTag(context.Background(), providers.TagJob, "page")
	if err != nil || len(listed) != 5 {
		t.Fatalf("ListByTag over pages of 2: %d instances, %v; want 5", len(listed), err)
	}
	if err := p.Terminate(context.Background(), []string{ins[0].ID}); err != nil {
		t.Fatal(err)
	}
	ids := []string{ins[0].ID, "i-00000000000000bad", ins[1].ID, ins[2].ID, ins[3].ID, ins[4].ID}
	if err := p.Terminate(context.Background(), ids); err != nil {
		t.Fatalf("Terminate with an unknown ID: %v", err)
	}
	described, err := p.Describe(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(described) != 5 {
		t.Errorf("Describe: %d instances, want 5 (the unknown one left out)", len(described))
	}
	for _, in := range described {
		if in.State != providers.Terminated || in.StateReason == "" {
			t.Errorf("%s: %s (%q), want terminated with a reason", in.ID, in.State, in.StateReason)
		}
	}
	if live, _ := p.ListByTag(context.Background(), providers.TagJob, "page"); len(live) != 0 {
		t.Errorf("still listed: %d", len(live))
	}
}

func TestNewValidates(t *testing.T) {
	_, client := start(t)
	tests := map[string]struct {
		opts    aws.Options
		wantErr string
	}{
		"no region": {opts: aws.Options{ImageID: "ami", InstanceTypes: table}, wantErr: "region is required"},
		"no image":  {opts: aws.Options{Region: "r", InstanceTypes: table}, wantErr: "imageID is required"},
		"no types":  {opts: aws.Options{Region: "r", ImageID: "ami"}, wantErr: "instanceTypes"},
		"no gpus":   {opts: aws.Options{Region: "r", ImageID: "ami", InstanceTypes: []aws.InstanceType{{Name: "m5.large"}}}, wantErr: "gpus and gpuModel"},
		"twice":     {opts: aws.Options{Region: "r", ImageID: "ami", InstanceTypes: []aws.InstanceType{table[0], table[0]}}, wantErr: "given twice"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := aws.New(client, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
