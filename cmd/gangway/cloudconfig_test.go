package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/placement"
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
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(cloudYAML, "TRACE", trace)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, a := newTestCmd(t, "server")
	if err := cmd.ParseFlags([]string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	if err := load(cmd.Flags(), &a.cfg, a.configFile); err != nil {
		t.Fatal(err)
	}
	if err := a.cfg.Validate(true, false); err != nil {
		t.Fatalf("Validate:\n%v", err)
	}
	c := a.cfg.Cloud
	budget := 5000.0
	if diff := cmp.Diff(map[string]TeamCloudConfig{"nlp": {MonthlyBudget: &budget, MaxPricePerGPUHour: 2},
		"vision": {MaxPricePerGPUHour: 1.5}}, c.Teams); diff != "" {
		t.Errorf("teams (-want +got):\n%s", diff)
	}
	if c.BurstAfter.Duration != 20*time.Minute || c.ReconcileInterval.Duration != 30*time.Second {
		t.Errorf("durations: burstAfter %v, reconcileInterval %v", c.BurstAfter, c.ReconcileInterval)
	}

	s, err := buildCloud(t.Context(), c, fullstack.FakeHooks{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("buildCloud: %v", err)
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

	j := joinConfig(a.cfg)
	wantJoin := providers.Join{TemporalAddress: "temporal.internal:7233", Namespace: "default", RedisURL: "redis://redis.internal:6379/0",
		Binary: "/opt/gangway/bin/gangway", DataDir: "/data/gangway", FakeGPUs: true, Args: []string{"--heartbeat-interval", "3s"}}
	if diff := cmp.Diff(wantJoin, j); diff != "" {
		t.Errorf("join (-want +got):\n%s", diff)
	}
}

func TestValidateCloud(t *testing.T) {
	aws := func() ProviderConfig {
		return ProviderConfig{Type: "aws", Region: "us-east-1", Image: "ami-1",
			InstanceTypes: []InstanceTypeConfig{{Name: "p4d.24xlarge", GPUModel: "A100", GPUs: 8}}}
	}
	gcp := func() ProviderConfig {
		return ProviderConfig{Type: "gcp", Project: "p", Zones: []string{"us-central1-a"}, Image: "img",
			InstanceTypes: []InstanceTypeConfig{{Name: "a2-highgpu-8g", GPUModel: "A100", GPUs: 8}},
			Prices:        []PriceConfig{{MachineType: "a2-highgpu-8g", Region: "us-central1", Spot: 11}}}
	}
	fakeP := func() ProviderConfig {
		return ProviderConfig{Type: "fake", Pools: []FakePoolConfig{{Zone: "z", InstanceType: "t", GPUModel: "A100", GPUs: 8, CapacityType: "spot"}}}
	}
	neg := -1.0
	tests := map[string]struct {
		change   func(*CloudConfig)
		wantErrs []string
	}{
		"defaults":             {},
		"one of each provider": {change: func(c *CloudConfig) { c.Providers = []ProviderConfig{aws(), gcp(), fakeP()} }},
		"bad durations": {
			change: func(c *CloudConfig) {
				c.ReconcileInterval.Duration, c.OrphanGrace.Duration, c.OffersTTL.Duration, c.BurstAfter.Duration = 0, -time.Second, 0, -time.Minute
			},
			wantErrs: []string{"cloud.reconcileInterval: must be positive, got 0s", "cloud.orphanGrace: must be positive, got -1s",
				"cloud.offersTTL: must be positive, got 0s", "cloud.burstAfter: must not be negative, got -1m0s"},
		},
		"prices and teams": {
			change: func(c *CloudConfig) {
				c.OnPremPricePerGPUHour = map[string]float64{"onprem": -1, "On Prem": 2}
				c.Teams = map[string]TeamCloudConfig{"nlp": {MonthlyBudget: &neg}, "vision": {MaxPricePerGPUHour: -2}, "Bad_Team": {}}
			},
			wantErrs: []string{"cloud.onPremPricePerGPUHour.On Prem: must be a pool name (a DNS label)",
				"cloud.onPremPricePerGPUHour.onprem: must not be negative, got -1",
				"cloud.teams.Bad_Team: must be a team name (a DNS label)",
				"cloud.teams.nlp.monthlyBudget: must not be negative, got -1",
				"cloud.teams.vision.maxPricePerGPUHour: must not be negative, got -2"},
		},
		"join": {
			change:   func(c *CloudConfig) { c.Join.TemporalAddress, c.Join.RedisURL = "temporal", "http://x" },
			wantErrs: []string{`cloud.join.temporalAddress: want host:port, got "temporal"`, "cloud.join.redisURL: redis: invalid URL scheme: http"},
		},
		"unknown type and duplicate names": {
			change: func(c *CloudConfig) {
				c.Providers = []ProviderConfig{aws(), aws(), {Name: "x", Type: "azure"}}
			},
			wantErrs: []string{`cloud.providers[1].name: "aws" is cloud.providers[0]'s name too; give each provider its own`,
				`cloud.providers[2].type: must be aws, gcp or fake, got "azure"`},
		},
		"bad name and endpoint": {
			change: func(c *CloudConfig) {
				p := aws()
				p.Name, p.Endpoint = "AWS East", "localhost:4566"
				c.Providers = []ProviderConfig{p}
			},
			wantErrs: []string{`cloud.providers[0].name: must be a DNS label, got "AWS East"`,
				`cloud.providers[0].endpoint: want an http:// or https:// URL, got "localhost:4566"`},
		},
		"aws without its required fields": {
			change: func(c *CloudConfig) {
				c.Providers = []ProviderConfig{{Type: "aws", Zones: []string{"us-east-1a"}, Subnets: map[string]string{"us-east-1b": "subnet-1"}}}
			},
			wantErrs: []string{"cloud.providers[0].region: is required for aws",
				"cloud.providers[0].image: is required for aws: an AMI ID with gangway installed",
				"cloud.providers[0].instanceTypes: give at least one",
				"cloud.providers[0].subnets.us-east-1b: is not one of zones [us-east-1a]"},
		},
		"bad instance types": {
			change: func(c *CloudConfig) {
				p := aws()
				p.InstanceTypes = []InstanceTypeConfig{{GPUs: 8}, {Name: "a", GPUModel: "A100", GPUs: 8}, {Name: "a", GPUs: 1},
					{Name: "b", GPUModel: "A100"}, {Name: "c", GPUs: 1}, {Name: "d", GPUModel: "V100", GPUs: 1, OnDemandPrice: -3}}
				c.Providers = []ProviderConfig{p}
			},
			wantErrs: []string{"cloud.providers[0].instanceTypes[0].name: is required",
				"cloud.providers[0].instanceTypes[2].name: a given twice",
				"cloud.providers[0].instanceTypes[3].gpus: must be positive, got 0",
				"cloud.providers[0].instanceTypes[4].gpuModel: is required",
				"cloud.providers[0].instanceTypes[5].onDemandPrice: must not be negative, got -3"},
		},
		"gcp without its required fields": {
			change: func(c *CloudConfig) { c.Providers = []ProviderConfig{{Type: "gcp", DiskSizeGB: -1}} },
			wantErrs: []string{"cloud.providers[0].project: is required for gcp", "cloud.providers[0].zones: give at least one zone for gcp",
				"cloud.providers[0].image: is required for gcp: an image path with gangway installed",
				"cloud.providers[0].diskSizeGB: must not be negative, got -1", "cloud.providers[0].instanceTypes: give at least one"},
		},
		"gcp prices": {
			change: func(c *CloudConfig) {
				p := gcp()
				p.InstanceTypes = append(p.InstanceTypes, InstanceTypeConfig{Name: "a3-highgpu-8g", GPUModel: "H100", GPUs: 8})
				p.Prices = append(p.Prices, PriceConfig{MachineType: "g2-standard-4", Region: "r", Spot: 1},
					PriceConfig{MachineType: "a2-highgpu-8g"}, PriceConfig{MachineType: "a2-highgpu-8g", Region: "r"},
					PriceConfig{MachineType: "a2-highgpu-8g", Region: "r", Spot: -1})
				c.Providers = []ProviderConfig{p}
			},
			wantErrs: []string{`cloud.providers[0].prices[1].machineType: "g2-standard-4" is not in instanceTypes`,
				"cloud.providers[0].prices[2].region: is required",
				"cloud.providers[0].prices[3]: give a spot or an onDemand price (or both)",
				"cloud.providers[0].prices[4]: prices must not be negative, got spot -1, onDemand 0",
				"cloud.providers[0].instanceTypes[1]: a3-highgpu-8g has no entry in prices: the Compute API serves no prices, so it could never be offered"},
		},
		"fake pools": {
			change: func(c *CloudConfig) {
				p := fakeP()
				good := p.Pools[0]
				pool := func(f func(*FakePoolConfig)) FakePoolConfig { q := good; f(&q); return q }
				p.Pools = append(p.Pools,
					pool(func(q *FakePoolConfig) { q.Name = "Spot" }),
					pool(func(q *FakePoolConfig) { q.Zone = "" }),
					pool(func(q *FakePoolConfig) { q.GPUs = 9 }),
					pool(func(q *FakePoolConfig) { q.CapacityType = "reserved" }),
					pool(func(q *FakePoolConfig) { q.MaxInstances = -1 }))
				p.BootDelay.Duration, p.TraceOffset.Duration = -time.Second, -time.Hour
				c.Providers = []ProviderConfig{p, {Type: "fake"}}
			},
			wantErrs: []string{"cloud.providers[0].bootDelay: must not be negative, got -1s",
				"cloud.providers[0].traceOffset: must not be negative, got -1h0m0s",
				`cloud.providers[0].pools[1].name: must be a DNS label, got "Spot"`,
				"cloud.providers[0].pools[2].zone: is required",
				"cloud.providers[0].pools[3].gpus: must be 1 to 8, got 9",
				`cloud.providers[0].pools[4].capacityType: must be spot or on-demand, got "reserved"`,
				"cloud.providers[0].pools[5].maxInstances: must not be negative, got -1",
				`cloud.providers[1].name: "fake" is cloud.providers[0]'s name too; give each provider its own`,
				"cloud.providers[1].pools: give at least one pool for fake"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := defaultConfig()
			c.Agent.NodeID = "node-1"
			if tc.change != nil {
				tc.change(&c.Cloud)
			}
			var got []string
			if err := c.Validate(true, false); err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tc.wantErrs, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
			// The agent does not read the cloud section.
			if tc.wantErrs != nil {
				c.Agent.FakeGPUs = "8xH100"
				if err := c.Validate(false, true); err != nil {
					t.Errorf("Validate for the agent: %v", err)
				}
			}
		})
	}
}

func TestDevCloud(t *testing.T) {
	trace := writeTrace(t)
	c, err := devCloud(defaultCloudConfig(), devOptions{cloud: true, spotTrace: trace})
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
	if diff := cmp.Diff(map[string]float64{"onprem": devOnPremPrice}, c.OnPremPricePerGPUHour); diff != "" {
		t.Errorf("on-prem prices (-want +got):\n%s", diff)
	}
	var errs []string
	c.validate(func(field, format string, args ...any) { errs = append(errs, field) })
	if len(errs) > 0 {
		t.Errorf("dev cloud config does not validate: %v", errs)
	}

	off, err := devCloud(defaultCloudConfig(), devOptions{cloud: false})
	if err != nil || len(off.Providers) != 0 {
		t.Errorf("--cloud=false: providers %v, err %v", off.Providers, err)
	}
	own := defaultCloudConfig()
	own.Providers = []ProviderConfig{{Type: "gcp"}}
	if _, err := devCloud(own, devOptions{cloud: true}); err == nil || !strings.Contains(err.Error(), "cloud.providers[0].project") {
		t.Errorf("an invalid configured cloud: err %v", err)
	}
	if _, err := devCloud(defaultCloudConfig(), devOptions{cloud: true, spotTrace: filepath.Join(t.TempDir(), "none.json")}); err == nil {
		t.Error("a missing --spot-trace was accepted")
	}
}

func TestOnDemandPrices(t *testing.T) {
	c := defaultConfig()
	c.Cloud.Providers = []ProviderConfig{
		{Type: "aws", Region: "us-east-1", Zones: []string{"us-east-1a"},
			InstanceTypes: []InstanceTypeConfig{{Name: "p4d.24xlarge", GPUs: 8, OnDemandPrice: 32}, {Name: "g5.xlarge", GPUs: 1}}},
		{Name: "aws-west", Type: "aws", Region: "us-west-2",
			InstanceTypes: []InstanceTypeConfig{{Name: "p3.2xlarge", GPUs: 1, OnDemandPrice: 3.06}}},
		{Type: "gcp", Zones: []string{"us-central1-a", "us-central1-b", "europe-west4-a"},
			InstanceTypes: []InstanceTypeConfig{{Name: "a2-highgpu-8g", GPUs: 8}},
			Prices: []PriceConfig{{MachineType: "a2-highgpu-8g", Region: "us-central1", Spot: 11, OnDemand: 29.6},
				{MachineType: "a2-highgpu-8g", Region: "europe-west4", Spot: 12}}},
		{Type: "fake", Pools: []FakePoolConfig{
			{Name: "fake-spot", Zone: "z1", InstanceType: "a100x8", GPUs: 8, CapacityType: "spot"},
			{Zone: "z2", InstanceType: "a100x8", GPUs: 8, CapacityType: "spot"},
			{Zone: "z2", InstanceType: "a100x8", GPUs: 8, CapacityType: "on-demand", PricePerHour: 40},
			{Zone: "z1", InstanceType: "a100x8", GPUs: 8, CapacityType: "on-demand", PricePerHour: 32},
			{Zone: "z1", InstanceType: "h100x8", GPUs: 8, CapacityType: "spot"}}},
	}
	want := map[string]float64{
		"aws-us-east-1a-p4d-24xlarge-spot":    4,
		"aws-west-us-west-2a-p3-2xlarge-spot": 3.06, "aws-west-us-west-2b-p3-2xlarge-spot": 3.06,
		"aws-west-us-west-2c-p3-2xlarge-spot": 3.06, "aws-west-us-west-2d-p3-2xlarge-spot": 3.06,
		"aws-west-us-west-2e-p3-2xlarge-spot": 3.06, "aws-west-us-west-2f-p3-2xlarge-spot": 3.06,
		"gcp-us-central1-a-a2-highgpu-8g-spot": 3.7, "gcp-us-central1-b-a2-highgpu-8g-spot": 3.7,
		"fake-spot":           4,
		"fake-z2-a100x8-spot": 5,
	}
	if diff := cmp.Diff(want, c.Cloud.onDemandPrices()); diff != "" {
		t.Errorf("onDemandPrices (-want +got):\n%s", diff)
	}
	if got := defaultConfig().Cloud.onDemandPrices(); len(got) != 0 {
		t.Errorf("no providers: %v", got)
	}
}

func TestTeamLimits(t *testing.T) {
	zero, some := 0.0, 5000.0
	c := CloudConfig{Teams: map[string]TeamCloudConfig{
		"nlp":     {MonthlyBudget: &some, MaxPricePerGPUHour: 2},
		"vision":  {MaxPricePerGPUHour: 1.5},
		"interns": {MonthlyBudget: &zero},
	}}
	got := c.teamLimits()
	want := map[string]accounting.TeamLimit{
		"nlp":     {MonthlyBudget: 5000, MaxPricePerGPUHour: 2},
		"vision":  {MaxPricePerGPUHour: 1.5},
		"interns": {MonthlyBudget: math.SmallestNonzeroFloat64},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("teamLimits (-want +got):\n%s", diff)
	}
	// A budget of 0 leaves nothing to spend; no budget leaves no limit.
	policies, err := accounting.Budgets{Ledger: noSegments{}, Teams: got}.TeamPolicies(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if p := policies["interns"]; p.BudgetLeft <= 0 || p.BudgetLeft > 1e-300 {
		t.Errorf("interns: budget left %v, want nothing (but a budget)", p.BudgetLeft)
	}
	if p := policies["vision"]; p.BudgetLeft != placement.NoBudget {
		t.Errorf("vision: budget left %v, want none set", p.BudgetLeft)
	}
	if (CloudConfig{}).teamLimits() != nil {
		t.Error("no teams: want nil limits")
	}
}

type noSegments struct{}

func (noSegments) Segments(context.Context, time.Time, time.Time) ([]gangway.UsageSegment, error) {
	return nil, nil
}
