package config

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/redact"
	"github.com/gangwayhq/gangway/internal/transport"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/aws"
	"github.com/gangwayhq/gangway/providers/fake"
	"github.com/gangwayhq/gangway/providers/gcp"
)

// CloudConfig is rented capacity: the providers bursts launch in, how the
// server finds orphaned instances, and the prices and team limits the
// burst decision weighs. deploy/gangway.example.yaml documents each field.
type CloudConfig struct {
	Providers []ProviderConfig `yaml:"providers"`
	// ReconcileInterval is how often the server lists every provider's
	// Gangway instances and terminates the orphans; OrphanGrace spares
	// instances younger than it (a launch still in flight).
	ReconcileInterval gangway.Duration `yaml:"reconcileInterval"`
	OrphanGrace       gangway.Duration `yaml:"orphanGrace"`
	// OffersTTL is how long a provider's offers and prices are reused.
	OffersTTL gangway.Duration `yaml:"offersTTL"`
	// BurstAfter is how long a job's on-prem wait (waited so far plus
	// expected yet) must be before renting pays off.
	BurstAfter gangway.Duration `yaml:"burstAfter"`
	// OnPremPricePerGPUHour is the amortized price of each on-prem pool.
	OnPremPricePerGPUHour map[string]float64 `yaml:"onPremPricePerGPUHour"`
	// Teams caps each team's cloud spend.
	Teams map[string]TeamCloudConfig `yaml:"teams"`
	// Join is how launched instances' agents reach the control plane.
	Join JoinConfig `yaml:"join"`
}

// TeamCloudConfig is one team's limits on rented capacity.
type TeamCloudConfig struct {
	// MonthlyBudget is the most the team may spend in the cloud per
	// calendar month, in dollars; unset means no budget, 0 means none may
	// be spent.
	MonthlyBudget *float64 `yaml:"monthlyBudget"`
	// MaxPricePerGPUHour caps the price of any burst; 0 means no cap.
	MaxPricePerGPUHour float64 `yaml:"maxPricePerGPUHour"`
}

// JoinConfig is what a launched instance's boot script gives its agent.
type JoinConfig struct {
	// TemporalAddress and RedisURL as the instances reach them; "" means
	// temporal.address and redis.url.
	TemporalAddress string `yaml:"temporalAddress"`
	RedisURL        string `yaml:"redisURL"`
	// Binary is the gangway binary on the image ("" = gangway on PATH).
	Binary  string `yaml:"binary"`
	DataDir string `yaml:"dataDir"`
	// FakeGPUs has agents report the offer's GPUs instead of reading NVML.
	FakeGPUs bool     `yaml:"fakeGPUs"`
	Args     []string `yaml:"args"`
}

// Provider types.
const (
	ProviderAWS  = "aws"
	ProviderGCP  = "gcp"
	ProviderFake = "fake"
)

// ProviderConfig is one cloud account (or the fake cloud) bursts may use.
// Which fields apply depends on Type.
type ProviderConfig struct {
	// Name identifies the provider in offers, pools and tags; "" means
	// Type. Two providers of one type need distinct names.
	Name string `yaml:"name"`
	Type string `yaml:"type"` // aws, gcp or fake
	// Region (aws): where instances launch. Zones: aws, the availability
	// zones to offer (empty: every zone with a spot price); gcp, the zones
	// to offer and list (required).
	Region  string   `yaml:"region"`
	Zones   []string `yaml:"zones"`
	Project string   `yaml:"project"` // gcp
	// Endpoint overrides the cloud API's endpoint (a local test server or
	// an emulator); requests to it carry no credentials.
	Endpoint string `yaml:"endpoint"`
	// Image is the boot image: an AMI ID (aws) or an image path (gcp),
	// with gangway installed.
	Image string `yaml:"image"`
	// InstanceTypes (aws) or machine types (gcp) bursts may launch.
	InstanceTypes []InstanceTypeConfig `yaml:"instanceTypes"`
	// Prices (gcp) per machine type and region, since the Compute API
	// serves none.
	Prices []PriceConfig `yaml:"prices"`
	// aws only.
	Subnets          map[string]string `yaml:"subnets"` // zone → subnet ID
	SecurityGroupIDs []string          `yaml:"securityGroupIds"`
	KeyName          string            `yaml:"keyName"`
	InstanceProfile  string            `yaml:"instanceProfile"`
	// gcp only.
	DiskSizeGB     int64  `yaml:"diskSizeGB"`
	Network        string `yaml:"network"`
	Subnetwork     string `yaml:"subnetwork"`
	ServiceAccount string `yaml:"serviceAccount"`
	// fake only: its pools, boot delay and spot notice lead, where in its
	// traces it starts (the trace time that is now), and what its
	// instance IDs start with (fake.Options.IDPrefix: each server running
	// the fake cloud over one view needs its own).
	IDPrefix    string           `yaml:"idPrefix"`
	Pools       []FakePoolConfig `yaml:"pools"`
	BootDelay   gangway.Duration `yaml:"bootDelay"`
	NoticeLead  gangway.Duration `yaml:"noticeLead"`
	TraceOffset gangway.Duration `yaml:"traceOffset"`
}

// InstanceTypeConfig is an instance type (aws) or machine type (gcp).
type InstanceTypeConfig struct {
	Name     string `yaml:"name"`
	GPUModel string `yaml:"gpuModel"`
	GPUs     int    `yaml:"gpus"`
	// OnDemandPrice (aws) is the list price per instance-hour; 0 means no
	// on-demand offers of this type.
	OnDemandPrice float64 `yaml:"onDemandPrice"`
	// InterruptionRate is the spot interruption rate per instance-hour.
	InterruptionRate float64 `yaml:"interruptionRate"`
	// Accelerator (gcp, N1 types) is the accelerator type to attach.
	Accelerator string `yaml:"accelerator"`
}

// PriceConfig is what one GCP machine type costs per hour in one region.
type PriceConfig struct {
	MachineType string  `yaml:"machineType"`
	Region      string  `yaml:"region"`
	Spot        float64 `yaml:"spot"`     // 0: no spot offers
	OnDemand    float64 `yaml:"onDemand"` // 0: no on-demand offers
}

// FakePoolConfig is one pool of the fake cloud.
type FakePoolConfig struct {
	Name         string  `yaml:"name"` // "" = provider-zone-type-capacity
	Zone         string  `yaml:"zone"`
	InstanceType string  `yaml:"instanceType"`
	GPUModel     string  `yaml:"gpuModel"`
	GPUs         int     `yaml:"gpus"`
	CapacityType string  `yaml:"capacityType"` // spot or on-demand
	PricePerHour float64 `yaml:"pricePerHour"`
	MaxInstances int     `yaml:"maxInstances"` // 0 = no limit
	// Trace is a spot trace file (traces/spot format) driving the pool's
	// availability and price; TraceScale instances per trace unit.
	Trace            string  `yaml:"trace"`
	TraceScale       int     `yaml:"traceScale"`
	InterruptionRate float64 `yaml:"interruptionRate"`
}

func defaultCloudConfig() CloudConfig {
	return CloudConfig{
		ReconcileInterval: gangway.Duration{Duration: time.Minute},
		OrphanGrace:       gangway.Duration{Duration: 10 * time.Minute},
		OffersTTL:         gangway.Duration{Duration: 15 * time.Second},
		BurstAfter:        gangway.Duration{Duration: 10 * time.Minute},
	}
}

// EffectiveName is the provider's name: Name, or Type when unset.
func (p ProviderConfig) EffectiveName() string {
	if p.Name != "" {
		return p.Name
	}
	return p.Type
}

// Validate checks the cloud section alone, as `gangway dev` runs a
// config's own providers; Config.Validate checks it for `gangway server`.
func (c CloudConfig) Validate() error {
	var errs fieldErrors
	c.validate(errs.add)
	return errs.join()
}

// validateCloudJoin checks that instances a real cloud launches can join:
// they need a one-use token, which the join secret signs, and a Redis URL
// of their own, since what their boot data holds anything on the instance
// can read.
func (c Config) validateCloudJoin(bad func(field, format string, args ...any)) {
	for i, p := range c.Cloud.Providers {
		if p.Type != ProviderAWS && p.Type != ProviderGCP {
			continue
		}
		field := fmt.Sprintf("cloud.providers[%d]", i)
		if c.Server.Join.SecretFile == "" {
			bad(field, "its instances join with a one-use token the server signs: set server.join.secretFile")
		}
		if c.Cloud.Join.RedisURL == "" && redact.URL(c.Redis.URL) != c.Redis.URL {
			bad("cloud.join.redisURL", "must be set (to the agents' ACL user) for %s: the default, redis.url, is the server's own and holds its password, which would go into every instance's boot data", field)
		}
	}
}

// validate reports each bad field of the cloud section through bad.
func (c CloudConfig) validate(bad func(field, format string, args ...any)) {
	if c.ReconcileInterval.Duration <= 0 {
		bad("cloud.reconcileInterval", "must be positive, got %v", c.ReconcileInterval.Duration)
	}
	if c.OrphanGrace.Duration <= 0 {
		bad("cloud.orphanGrace", "must be positive, got %v", c.OrphanGrace.Duration)
	}
	if c.OffersTTL.Duration <= 0 {
		bad("cloud.offersTTL", "must be positive, got %v", c.OffersTTL.Duration)
	}
	if c.BurstAfter.Duration < 0 {
		bad("cloud.burstAfter", "must not be negative, got %v", c.BurstAfter.Duration)
	}
	for _, pool := range slices.Sorted(maps.Keys(c.OnPremPricePerGPUHour)) {
		field := "cloud.onPremPricePerGPUHour." + pool
		if !gangway.IsDNSLabel(pool) {
			bad(field, "must be a pool name (a DNS label)")
		} else if price := c.OnPremPricePerGPUHour[pool]; price < 0 {
			bad(field, "must not be negative, got %v", price)
		}
	}
	for _, team := range slices.Sorted(maps.Keys(c.Teams)) {
		field := "cloud.teams." + team
		t := c.Teams[team]
		switch {
		case !gangway.IsDNSLabel(team):
			bad(field, "must be a team name (a DNS label)")
		case t.MonthlyBudget != nil && *t.MonthlyBudget < 0:
			bad(field+".monthlyBudget", "must not be negative, got %v", *t.MonthlyBudget)
		case t.MaxPricePerGPUHour < 0:
			bad(field+".maxPricePerGPUHour", "must not be negative, got %v", t.MaxPricePerGPUHour)
		}
	}
	if a := c.Join.TemporalAddress; a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			bad("cloud.join.temporalAddress", "want host:port, got %q", a)
		}
	}
	if u := c.Join.RedisURL; u != "" {
		if err := transport.CheckURL(u); err != nil {
			bad("cloud.join.redisURL", "%v", err)
		}
	}
	seen := map[string]int{}
	for i, p := range c.Providers {
		field := fmt.Sprintf("cloud.providers[%d]", i)
		name := p.EffectiveName()
		if j, dup := seen[name]; dup {
			bad(field+".name", "%q is cloud.providers[%d]'s name too; give each provider its own", name, j)
		}
		seen[name] = i
		if p.Name != "" && !gangway.IsDNSLabel(p.Name) {
			bad(field+".name", "must be a DNS label, got %q", p.Name)
		}
		if p.Endpoint != "" {
			if u, err := url.Parse(p.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(field+".endpoint", "want an http:// or https:// URL, got %q", redact.URL(p.Endpoint))
			}
		}
		switch p.Type {
		case ProviderAWS:
			p.validateAWS(field, bad)
		case ProviderGCP:
			p.validateGCP(field, bad)
		case ProviderFake:
			p.validateFake(field, bad)
		default:
			bad(field+".type", "must be aws, gcp or fake, got %q", p.Type)
		}
	}
}

func (p ProviderConfig) validateAWS(field string, bad func(field, format string, args ...any)) {
	if p.Region == "" {
		bad(field+".region", "is required for aws")
	}
	if p.Image == "" {
		bad(field+".image", "is required for aws: an AMI ID with gangway installed")
	}
	validateTypes(field, p.InstanceTypes, bad)
	for _, z := range slices.Sorted(maps.Keys(p.Subnets)) {
		if len(p.Zones) > 0 && !slices.Contains(p.Zones, z) {
			bad(field+".subnets."+z, "is not one of zones %v", p.Zones)
		}
	}
}

func (p ProviderConfig) validateGCP(field string, bad func(field, format string, args ...any)) {
	if p.Project == "" {
		bad(field+".project", "is required for gcp")
	}
	if len(p.Zones) == 0 {
		bad(field+".zones", "give at least one zone for gcp")
	}
	if p.Image == "" {
		bad(field+".image", "is required for gcp: an image path with gangway installed")
	}
	if p.DiskSizeGB < 0 {
		bad(field+".diskSizeGB", "must not be negative, got %d", p.DiskSizeGB)
	}
	validateTypes(field, p.InstanceTypes, bad)
	priced := map[string]bool{}
	for k, pr := range p.Prices {
		f := fmt.Sprintf("%s.prices[%d]", field, k)
		switch {
		case !slices.ContainsFunc(p.InstanceTypes, func(t InstanceTypeConfig) bool { return t.Name == pr.MachineType }):
			bad(f+".machineType", "%q is not in instanceTypes", pr.MachineType)
		case pr.Region == "":
			bad(f+".region", "is required")
		case pr.Spot < 0 || pr.OnDemand < 0:
			bad(f, "prices must not be negative, got spot %v, onDemand %v", pr.Spot, pr.OnDemand)
		case pr.Spot == 0 && pr.OnDemand == 0:
			bad(f, "give a spot or an onDemand price (or both)")
		}
		priced[pr.MachineType] = true
	}
	for k, t := range p.InstanceTypes {
		if t.Name != "" && !priced[t.Name] {
			bad(fmt.Sprintf("%s.instanceTypes[%d]", field, k), "%s has no entry in prices: the Compute API serves no prices, so it could never be offered", t.Name)
		}
	}
}

func validateTypes(field string, types []InstanceTypeConfig, bad func(field, format string, args ...any)) {
	if len(types) == 0 {
		bad(field+".instanceTypes", "give at least one")
	}
	seen := map[string]bool{}
	for k, t := range types {
		f := fmt.Sprintf("%s.instanceTypes[%d]", field, k)
		switch {
		case t.Name == "":
			bad(f+".name", "is required")
		case seen[t.Name]:
			bad(f+".name", "%s given twice", t.Name)
		case t.GPUs <= 0:
			bad(f+".gpus", "must be positive, got %d", t.GPUs)
		case t.GPUModel == "":
			bad(f+".gpuModel", "is required")
		case t.OnDemandPrice < 0:
			bad(f+".onDemandPrice", "must not be negative, got %v", t.OnDemandPrice)
		case t.InterruptionRate < 0:
			bad(f+".interruptionRate", "must not be negative, got %v", t.InterruptionRate)
		}
		seen[t.Name] = true
	}
}

func (p ProviderConfig) validateFake(field string, bad func(field, format string, args ...any)) {
	if len(p.Pools) == 0 {
		bad(field+".pools", "give at least one pool for fake")
	}
	if p.BootDelay.Duration < 0 {
		bad(field+".bootDelay", "must not be negative, got %v", p.BootDelay.Duration)
	}
	if p.IDPrefix != "" && !gangway.IsDNSLabel(p.IDPrefix) {
		bad(field+".idPrefix", "must be a DNS label (it starts node IDs and task queue names), got %q", p.IDPrefix)
	}
	if p.NoticeLead.Duration < 0 {
		bad(field+".noticeLead", "must not be negative, got %v", p.NoticeLead.Duration)
	}
	if p.TraceOffset.Duration < 0 {
		bad(field+".traceOffset", "must not be negative, got %v", p.TraceOffset.Duration)
	}
	for k, pl := range p.Pools {
		f := fmt.Sprintf("%s.pools[%d]", field, k)
		switch {
		case pl.Name != "" && !gangway.IsDNSLabel(pl.Name):
			bad(f+".name", "must be a DNS label, got %q", pl.Name)
		case pl.Zone == "":
			bad(f+".zone", "is required")
		case pl.InstanceType == "":
			bad(f+".instanceType", "is required")
		case pl.GPUs <= 0 || pl.GPUs > 8:
			bad(f+".gpus", "must be 1 to 8, got %d", pl.GPUs)
		case pl.GPUModel == "":
			bad(f+".gpuModel", "is required")
		case !gangway.CapacityType(pl.CapacityType).Cloud():
			bad(f+".capacityType", "must be spot or on-demand, got %q", pl.CapacityType)
		case pl.PricePerHour < 0:
			bad(f+".pricePerHour", "must not be negative, got %v", pl.PricePerHour)
		case pl.MaxInstances < 0:
			bad(f+".maxInstances", "must not be negative, got %d", pl.MaxInstances)
		case pl.TraceScale < 0:
			bad(f+".traceScale", "must not be negative, got %d", pl.TraceScale)
		case pl.InterruptionRate < 0:
			bad(f+".interruptionRate", "must not be negative, got %v", pl.InterruptionRate)
		}
	}
}

// TeamLimits are the teams' cloud limits as the ledger's budgets apply
// them. A budget of 0 (nothing may be spent) becomes the smallest positive
// budget, since the ledger reads 0 as no budget.
func (c CloudConfig) TeamLimits() map[string]accounting.TeamLimit {
	if len(c.Teams) == 0 {
		return nil
	}
	out := make(map[string]accounting.TeamLimit, len(c.Teams))
	for team, t := range c.Teams {
		l := accounting.TeamLimit{MaxPricePerGPUHour: t.MaxPricePerGPUHour}
		if t.MonthlyBudget != nil {
			l.MonthlyBudget = max(*t.MonthlyBudget, math.SmallestNonzeroFloat64)
		}
		out[team] = l
	}
	return out
}

// AWSOptions is an aws provider section as the aws package takes it.
func (pc ProviderConfig) AWSOptions(log *slog.Logger) aws.Options {
	opts := aws.Options{Name: pc.EffectiveName(), Region: pc.Region, Zones: pc.Zones, Subnets: pc.Subnets, ImageID: pc.Image,
		SecurityGroupIDs: pc.SecurityGroupIDs, KeyName: pc.KeyName, InstanceProfile: pc.InstanceProfile, Log: log}
	for _, t := range pc.InstanceTypes {
		opts.InstanceTypes = append(opts.InstanceTypes, aws.InstanceType{Name: t.Name, GPUModel: t.GPUModel, GPUs: t.GPUs,
			OnDemandPrice: t.OnDemandPrice, InterruptionRate: t.InterruptionRate})
	}
	return opts
}

// GCPOptions is a gcp provider section as the gcp package takes it.
func (pc ProviderConfig) GCPOptions(log *slog.Logger) gcp.Options {
	opts := gcp.Options{Name: pc.EffectiveName(), Project: pc.Project, Zones: pc.Zones, Image: pc.Image, DiskSizeGB: pc.DiskSizeGB,
		Network: pc.Network, Subnetwork: pc.Subnetwork, ServiceAccount: pc.ServiceAccount, Log: log}
	for _, t := range pc.InstanceTypes {
		opts.MachineTypes = append(opts.MachineTypes, gcp.MachineType{Name: t.Name, GPUModel: t.GPUModel, GPUs: t.GPUs,
			Accelerator: t.Accelerator, InterruptionRate: t.InterruptionRate})
	}
	for _, pr := range pc.Prices {
		opts.Prices = append(opts.Prices, gcp.Price{MachineType: pr.MachineType, Region: pr.Region, Spot: pr.Spot, OnDemand: pr.OnDemand})
	}
	return opts
}

// FakePools are a fake provider's pools, without their traces.
func (pc ProviderConfig) FakePools() []fake.Pool {
	var out []fake.Pool
	for _, pl := range pc.Pools {
		out = append(out, fake.Pool{Name: pl.Name, Zone: pl.Zone, InstanceType: pl.InstanceType, GPUModel: pl.GPUModel, GPUs: pl.GPUs,
			CapacityType: gangway.CapacityType(pl.CapacityType), PricePerHour: pl.PricePerHour,
			MaxInstances: pl.MaxInstances, TraceScale: pl.TraceScale, InterruptionRate: pl.InterruptionRate})
	}
	return out
}

// OnDemandPrices maps each spot pool the providers can offer to the
// on-demand price per GPU-hour of the same instance type, for the "spot
// saved" column of `gangway cost`; each provider package prices its own
// (aws, gcp and fake OnDemandPrices), from config alone.
func (c CloudConfig) OnDemandPrices() map[string]float64 {
	out := map[string]float64{}
	for _, p := range c.Providers {
		switch p.Type {
		case ProviderAWS:
			maps.Copy(out, aws.OnDemandPrices(p.AWSOptions(nil)))
		case ProviderGCP:
			maps.Copy(out, gcp.OnDemandPrices(p.GCPOptions(nil)))
		case ProviderFake:
			maps.Copy(out, fake.OnDemandPrices(fake.Options{Name: p.EffectiveName(), Pools: p.FakePools()}))
		}
	}
	return out
}

// ProviderJoin is the join section as launched instances' agents are
// given it.
func (j JoinConfig) ProviderJoin() providers.Join {
	return providers.Join{TemporalAddress: j.TemporalAddress, RedisURL: j.RedisURL,
		Binary: j.Binary, DataDir: j.DataDir, FakeGPUs: j.FakeGPUs, Args: j.Args}
}

// Join is what launched instances' agents are given: the join section,
// with the server's own Temporal and Redis where it names none.
func (c Config) Join() providers.Join {
	out := c.Cloud.Join.ProviderJoin()
	out.Namespace = c.Temporal.Namespace
	if out.TemporalAddress == "" {
		out.TemporalAddress = c.Temporal.Address
	}
	if out.RedisURL == "" {
		out.RedisURL = c.Redis.URL
	}
	return out
}
