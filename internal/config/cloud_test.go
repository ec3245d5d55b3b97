package config

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/placement"
)

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
		"defaults": {},
		"a cloud without a join secret, and the server's Redis password for instances": {
			change: func(c *CloudConfig) {
				c.Providers = []ProviderConfig{aws()}
			},
			wantErrs: []string{"cloud.providers[0]: its instances join with a one-use token the server signs: set server.join.secretFile",
				"cloud.join.redisURL: must be set (to the agents' ACL user) for cloud.providers[0]: the default, redis.url, is the server's own and holds its password, which would go into every instance's boot data"},
		},
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
				p.IDPrefix = "Fake_1"
				c.Providers = []ProviderConfig{p, {Type: "fake"}}
			},
			wantErrs: []string{"cloud.providers[0].bootDelay: must not be negative, got -1s",
				`cloud.providers[0].idPrefix: must be a DNS label (it starts node IDs and task queue names), got "Fake_1"`,
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
			c := Default()
			c.Agent.NodeID = "node-1"
			c.Server.Join.SecretFile = "cloud_test.go" // any file: it is only checked to exist
			if tc.change != nil {
				tc.change(&c.Cloud)
			}
			if strings.HasPrefix(name, "a cloud without a join secret") {
				c.Server.Join.SecretFile, c.Redis.URL = "", "redis://gangway-server:s3cret@redis:6379/0"
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

func TestOnDemandPrices(t *testing.T) {
	c := Default()
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
	if diff := cmp.Diff(want, c.Cloud.OnDemandPrices()); diff != "" {
		t.Errorf("onDemandPrices (-want +got):\n%s", diff)
	}
	if got := Default().Cloud.OnDemandPrices(); len(got) != 0 {
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
	got := c.TeamLimits()
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
	if (CloudConfig{}).TeamLimits() != nil {
		t.Error("no teams: want nil limits")
	}
}

type noSegments struct{}

func (noSegments) Segments(context.Context, time.Time, time.Time) ([]gangway.UsageSegment, error) {
	return nil, nil
}
