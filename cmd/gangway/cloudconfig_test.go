package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway/internal/config"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/providers"
)

// cloudYAML sets every field of the cloud section.
const cloudYAML = `
cloud:
  reconcileInterval: 30s
  orphanGrace: 5m
  offersTTL: 10s
  burstAfter: 20m
  onPremPricePerGPUHour: {onprem: 2.5}
  teams:
    nlp: {monthlyBudget: 5000, maxPricePerGPUHour: 2}
    vision: {maxPricePerGPUHour: 1.5}
  join:
    temporalAddress: temporal.internal:7233
    redisURL: redis://redis.internal:6379/0
    binary: /opt/gangway/bin/gangway
    dataDir: /data/gangway
    fakeGPUs: true
    args: ["--heartbeat-interval", "3s"]
  providers:
    - type: aws
      region: us-east-1
      zones: [us-east-1a]
      endpoint: http://127.0.0.1:1
      image: ami-0123
      subnets: {us-east-1a: subnet-1}
      securityGroupIds: [sg-1]
      keyName: ops
      instanceProfile: gangway-node
      instanceTypes:
        - {name: p4d.24xlarge, gpuModel: A100, gpus: 8, onDemandPrice: 32.77, interruptionRate: 0.05}
    - name: gcp-central
      type: gcp
      project: my-project
      zones: [us-central1-a]
      endpoint: http://127.0.0.1:1
      image: projects/my-project/global/images/family/gangway
      diskSizeGB: 200
      network: default
      subnetwork: regions/us-central1/subnetworks/default
      serviceAccount: gangway@my-project.iam.gserviceaccount.com
      instanceTypes:
        - {name: a2-highgpu-8g, gpuModel: A100, gpus: 8, interruptionRate: 0.08}
        - {name: n1-standard-8, gpuModel: V100, gpus: 1, accelerator: nvidia-tesla-v100}
      prices:
        - {machineType: a2-highgpu-8g, region: us-central1, spot: 11.75, onDemand: 29.39}
        - {machineType: n1-standard-8, region: us-central1, spot: 0.9}
    - type: fake
      bootDelay: 1s
      noticeLead: 30s
      traceOffset: 1h
      pools:
        - {name: fake-spot, zone: z1, instanceType: a100x8, gpuModel: A100, gpus: 8, capacityType: spot,
           pricePerHour: 12, trace: TRACE, traceScale: 4, interruptionRate: 0.1}
        - {zone: z1, instanceType: a100x8, gpuModel: A100, gpus: 8, capacityType: on-demand, pricePerHour: 32, maxInstances: 2}
`

func writeTrace(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.json")
	data := `{"metadata": {"gap_seconds": 60}, "data": [0, 1, 1, 0, 1, 1, 1, 0], "prices": [0.5, 0.5, 1.5, 1.5, 1, 1, 1, 1]}`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCloudConfigLoadsValidatesAndBuilds(t *testing.T) {
	clearEnv(t)
	trace := writeTrace(t)
	path := filepath.Join(t.TempDir(), "gangway.yaml")
	secret := filepath.Join(t.TempDir(), "join-secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := "server:\n  join:\n    secretFile: " + secret + "\n" + strings.ReplaceAll(cloudYAML, "TRACE", trace)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, a := newTestCmd(t, "server")
	if err := cmd.ParseFlags([]string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	if err := config.Load(cmd.Flags(), &a.cfg, a.configFile); err != nil {
		t.Fatal(err)
	}
	if err := a.cfg.Validate(true, false); err != nil {
		t.Fatalf("Validate:\n%v", err)
	}
	c := a.cfg.Cloud
	budget := 5000.0
	if diff := cmp.Diff(map[string]config.TeamCloudConfig{"nlp": {MonthlyBudget: &budget, MaxPricePerGPUHour: 2},
		"vision": {MaxPricePerGPUHour: 1.5}}, c.Teams); diff != "" {
		t.Errorf("teams (-want +got):\n%s", diff)
	}
	if c.BurstAfter.Duration != 20*time.Minute || c.ReconcileInterval.Duration != 30*time.Second {
		t.Errorf("durations: burstAfter %v, reconcileInterval %v", c.BurstAfter, c.ReconcileInterval)
	}

	s, err := fullstack.BuildConfiguredCloud(t.Context(), c, fullstack.FakeHooks{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("BuildConfiguredCloud: %v", err)
	}
	defer s.Close()
	if diff := cmp.Diff([]string{"aws", "fake", "gcp-central"}, s.Registry.Names()); diff != "" {
		t.Errorf("providers (-want +got):\n%s", diff)
	}
	if len(s.Fakes) != 1 {
		t.Fatalf("%d fakes, want 1", len(s.Fakes))
	}
	offers, err := s.Fakes[0].Offers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The trace starts an hour in (tick 60 wraps to tick 4, price 1, the
	// mean of the trace's prices); rescaled to a mean of $12/h.
	want := []string{"fake-spot spot $12.00/h", "fake-z1-a100x8-on-demand on-demand $32.00/h"}
	var got []string
	for _, o := range offers {
		got = append(got, fmt.Sprintf("%s %s $%.2f/h", o.Pool, o.CapacityType, o.PricePerHour))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fake offers (-want +got):\n%s", diff)
	}

	j := a.cfg.Join()
	wantJoin := providers.Join{TemporalAddress: "temporal.internal:7233", Namespace: "default", RedisURL: "redis://redis.internal:6379/0",
		Binary: "/opt/gangway/bin/gangway", DataDir: "/data/gangway", FakeGPUs: true, Args: []string{"--heartbeat-interval", "3s"}}
	if diff := cmp.Diff(wantJoin, j); diff != "" {
		t.Errorf("join (-want +got):\n%s", diff)
	}
}

func TestDevCloud(t *testing.T) {
	trace := writeTrace(t)
	c, err := devCloud(config.Default().Cloud, devOptions{cloud: true, spotTrace: trace})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Providers) != 1 || c.Providers[0].Type != "fake" || len(c.Providers[0].Pools) != 2 {
		t.Fatalf("dev cloud: %+v", c.Providers)
	}
	p := c.Providers[0]
	// The trace's longest run of availability starts at tick 4 of 60s.
	if p.TraceOffset.Duration != 4*time.Minute || p.Pools[0].Trace != trace {
		t.Errorf("trace offset %v, trace %q; want 4m, %q", p.TraceOffset.Duration, p.Pools[0].Trace, trace)
	}
	if diff := cmp.Diff(map[string]float64{"onprem": config.DevOnPremPrice}, c.OnPremPricePerGPUHour); diff != "" {
		t.Errorf("on-prem prices (-want +got):\n%s", diff)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("dev cloud config does not validate: %v", err)
	}

	off, err := devCloud(config.Default().Cloud, devOptions{cloud: false})
	if err != nil || len(off.Providers) != 0 {
		t.Errorf("--cloud=false: providers %v, err %v", off.Providers, err)
	}
	own := config.Default().Cloud
	own.Providers = []config.ProviderConfig{{Type: "gcp"}}
	if _, err := devCloud(own, devOptions{cloud: true}); err == nil || !strings.Contains(err.Error(), "cloud.providers[0].project") {
		t.Errorf("an invalid configured cloud: err %v", err)
	}
	if _, err := devCloud(config.Default().Cloud, devOptions{cloud: true, spotTrace: filepath.Join(t.TempDir(), "none.json")}); err == nil {
		t.Error("a missing --spot-trace was accepted")
	}
}
