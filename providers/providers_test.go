package providers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/providers"
)

func TestToken(t *testing.T) {
	tok := providers.Token("train-resnet", 1)
	if !regexp.MustCompile(`^gw-[0-9a-f]{32}$`).MatchString(tok) {
		t.Errorf("Token = %q, want gw- and 32 hex digits", tok)
	}
	if providers.Token("train-resnet", 1) != tok {
		t.Error("Token is not deterministic")
	}
	distinct := map[string]bool{}
	for _, in := range []struct {
		job     string
		attempt int
	}{{"a", 1}, {"a", 2}, {"b", 1}, {"a/1", 0}, {"a", 11}, {"a1", 1}} {
		distinct[providers.Token(in.job, in.attempt)] = true
	}
	if len(distinct) != 6 {
		t.Errorf("%d distinct tokens for 6 inputs", len(distinct))
	}
	u := providers.RequestUUID("train-resnet", 1)
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(u) {
		t.Errorf("RequestUUID = %q, want a version 5 UUID", u)
	}
	if u != providers.RequestUUID("train-resnet", 1) || u == providers.RequestUUID("train-resnet", 2) {
		t.Error("RequestUUID is not a deterministic function of job and attempt")
	}
	if providers.TokenUUID(tok, 0) != u || providers.TokenUUID(tok, 1) == u {
		t.Error("TokenUUID(token, 0) should be RequestUUID and differ per index")
	}
}

func TestRetryableAndReason(t *testing.T) {
	tests := map[string]struct {
		err           error
		wantRetryable bool
		wantReason    string
	}{
		"nil":         {err: nil},
		"no capacity": {err: fmt.Errorf("aws: run: %w: %w", providers.ErrNoCapacity, errors.New("InsufficientInstanceCapacity")), wantReason: "NoCapacity"},
		"quota":       {err: fmt.Errorf("x: %w", providers.ErrQuota), wantReason: "Quota"},
		"price":       {err: fmt.Errorf("x: %w", providers.ErrPriceTooLow), wantReason: "PriceTooLow"},
		"not found":   {err: fmt.Errorf("x: %w", providers.ErrNotFound), wantReason: "NotFound"},
		"auth":        {err: fmt.Errorf("x: %w", providers.ErrAuth), wantReason: "Auth"},
		"invalid":     {err: fmt.Errorf("x: %w", providers.ErrInvalid), wantReason: "Invalid"},
		"throttled":   {err: fmt.Errorf("x: %w", providers.ErrThrottled), wantRetryable: true, wantReason: "Throttled"},
		"deadline":    {err: fmt.Errorf("x: %w", context.DeadlineExceeded), wantRetryable: true},
		"canceled":    {err: fmt.Errorf("x: %w", context.Canceled)},
		"unknown":     {err: errors.New("connection reset by peer"), wantRetryable: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := providers.Retryable(tc.err); got != tc.wantRetryable {
				t.Errorf("Retryable = %v, want %v", got, tc.wantRetryable)
			}
			if got := providers.Reason(tc.err); got != tc.wantReason {
				t.Errorf("Reason = %q, want %q", got, tc.wantReason)
			}
		})
	}
}

func TestPoolName(t *testing.T) {
	tests := map[string]struct {
		provider, zone, instanceType string
		ct                           gangway.CapacityType
		want                         string
	}{
		"aws":        {"aws", "us-east-1a", "p3.2xlarge", gangway.CapacitySpot, "aws-us-east-1a-p3-2xlarge-spot"},
		"gcp":        {"gcp", "us-central1-a", "a2-highgpu-1g", gangway.CapacityOnDemand, "gcp-us-central1-a-a2-highgpu-1g-on-demand"},
		"odd chars":  {"My Cloud", "Zone_1", "X..Y", gangway.CapacitySpot, "my-cloud-zone-1-x-y-spot"},
		"long":       {"aws", strings.Repeat("z", 70), "t", gangway.CapacitySpot, strings.TrimRight(("aws-" + strings.Repeat("z", 70))[:63], "-")},
		"no trailer": {"aws", "a", "b-", gangway.CapacitySpot, "aws-a-b-spot"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := providers.PoolName(tc.provider, tc.zone, tc.instanceType, tc.ct); got != tc.want {
				t.Errorf("PoolName = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLaunchRequestValidate(t *testing.T) {
	good := providers.LaunchRequest{Offer: gangway.Offer{InstanceType: "p3.2xlarge", CapacityType: gangway.CapacitySpot},
		Count: 2, Token: providers.Token("j", 1), JobID: "j", Attempt: 1}
	tests := map[string]struct {
		mutate  func(*providers.LaunchRequest)
		wantErr string
	}{
		"good":           {mutate: func(*providers.LaunchRequest) {}},
		"zero count":     {mutate: func(r *providers.LaunchRequest) { r.Count = 0 }, wantErr: "count must be positive"},
		"min over count": {mutate: func(r *providers.LaunchRequest) { r.MinCount = 3 }, wantErr: "minCount must be between 0 and count 2"},
		"no token":       {mutate: func(r *providers.LaunchRequest) { r.Token = "" }, wantErr: "token is required"},
		"bad token":      {mutate: func(r *providers.LaunchRequest) { r.Token = "Has Spaces" }, wantErr: "token must be a DNS label"},
		"no job":         {mutate: func(r *providers.LaunchRequest) { r.JobID = "" }, wantErr: "jobID is required"},
		"no type":        {mutate: func(r *providers.LaunchRequest) { r.Offer.InstanceType = "" }, wantErr: "offer.instanceType is required"},
		"bad capacity":   {mutate: func(r *providers.LaunchRequest) { r.Offer.CapacityType = "reserved" }, wantErr: "offer.capacityType"},
		"negative price": {mutate: func(r *providers.LaunchRequest) { r.MaxPricePerHour = -1 }, wantErr: "maxPricePerHour"},
		"reserved tag":   {mutate: func(r *providers.LaunchRequest) { r.Tags = map[string]string{"gangway-job": "x"} }, wantErr: "reserved"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := good
			tc.mutate(&r)
			err := r.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, providers.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Validate = %v, want ErrInvalid mentioning %q", err, tc.wantErr)
			}
		})
	}
	if got := (providers.LaunchRequest{Count: 4, MinCount: 0}).Min(); got != 4 {
		t.Errorf("Min with MinCount 0 = %d, want 4", got)
	}
	r := good
	r.Tags = map[string]string{"team": "vision"}
	want := map[string]string{"team": "vision", providers.TagJob: "j", providers.TagAttempt: "1", providers.TagToken: r.Token, providers.TagPool: ""}
	if diff := cmp.Diff(want, r.InstanceTags()); diff != "" {
		t.Errorf("InstanceTags (-want +got):\n%s", diff)
	}
}

// TestBootScriptRuns runs the boot script under sh with a stand-in for
// the gangway binary, so quoting is checked by a real shell.
func TestBootScriptRuns(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	stub := filepath.Join(dir, "gang way")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\nprintf 'redis=%s token=%s\\n' \"$GANGWAY_REDIS_URL\" \"$GANGWAY_JOIN_TOKEN\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := providers.BootScript(
		providers.Join{Binary: stub, TemporalAddress: "t:7233", RedisURL: "redis://:p'w$x@r:6379/0?a=1&b=2", Token: "s3cr3t tok",
			FakeGPUs: true, DataDir: "/var/lib/gang way", Args: []string{"--log-level", "debug"}},
		providers.Boot{JobID: "j\nrm -rf /", Attempt: 2, Pool: "aws-us-east-1a-p3-2xlarge-spot", GPUModel: "V100", GPUs: 1,
			NodeIDCommand: "echo i-0abc", AddrCommand: "echo 10.0.0.5"})
	out, err := exec.Command(sh, "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("sh: %v\n%s\nscript:\n%s", err, out, script)
	}
	want := strings.Join([]string{"[agent]", "[--node-id]", "[i-0abc]", "[--addr]", "[10.0.0.5]", "[--pool]", "[aws-us-east-1a-p3-2xlarge-spot]",
		"[--fake-gpus]", "[1xV100]", "[--data-dir]", "[/var/lib/gang way]", "[--log-level]", "[debug]",
		"redis=redis://:p'w$x@r:6379/0?a=1&b=2 token=s3cr3t tok", ""}, "\n")
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("agent saw (-want +got):\n%s\nscript:\n%s", diff, script)
	}
	if strings.Contains(script, "\nrm -rf") {
		t.Errorf("a newline in the job ID escaped the comment:\n%s", script)
	}
}
