package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"google.golang.org/api/option"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/aws"
	"github.com/gangwayhq/gangway/providers/fake"
	"github.com/gangwayhq/gangway/providers/gcp"
)

// buildCloud builds the configured providers. ctx bounds loading cloud
// credentials only.
func buildCloud(ctx context.Context, c CloudConfig, hooks fullstack.FakeHooks, log *slog.Logger) (*fullstack.Cloud, error) {
	s := &fullstack.Cloud{}
	var ps []providers.Provider
	for i, pc := range c.Providers {
		p, err := buildProvider(ctx, s, pc, hooks, log.With("provider", pc.name()))
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("cloud.providers[%d] (%s): %w", i, pc.name(), err)
		}
		ps = append(ps, p)
	}
	reg, err := cloud.NewRegistry(ps, cloud.RegistryOptions{OffersTTL: c.OffersTTL.Duration, Log: log})
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	s.Registry = reg
	return s, nil
}

// buildProvider builds one provider, adding what it needs closed or
// ticked to s.
func buildProvider(ctx context.Context, s *fullstack.Cloud, pc ProviderConfig, hooks fullstack.FakeHooks, log *slog.Logger) (providers.Provider, error) {
	switch pc.Type {
	case providerAWS:
		return buildAWS(ctx, pc, log)
	case providerGCP:
		p, closeFn, err := buildGCP(ctx, pc, log)
		if closeFn != nil {
			s.Closers = append(s.Closers, closeFn)
		}
		return p, err
	case providerFake:
		f, err := buildFake(pc, hooks, log)
		if err != nil {
			return nil, err
		}
		s.Fakes = append(s.Fakes, f)
		return f, nil
	}
	return nil, fmt.Errorf("unknown type %q", pc.Type)
}

func buildAWS(ctx context.Context, pc ProviderConfig, log *slog.Logger) (providers.Provider, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(pc.Region))
	if err != nil {
		return nil, fmt.Errorf("aws credentials: %w", err)
	}
	client := ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		if pc.Endpoint != "" {
			o.BaseEndpoint = awssdk.String(pc.Endpoint)
			o.Credentials = awssdk.AnonymousCredentials{}
		}
	})
	return aws.New(client, awsOptions(pc, log))
}

func awsOptions(pc ProviderConfig, log *slog.Logger) aws.Options {
	opts := aws.Options{Name: pc.name(), Region: pc.Region, Zones: pc.Zones, Subnets: pc.Subnets, ImageID: pc.Image,
		SecurityGroupIDs: pc.SecurityGroupIDs, KeyName: pc.KeyName, InstanceProfile: pc.InstanceProfile, Log: log}
	for _, t := range pc.InstanceTypes {
		opts.InstanceTypes = append(opts.InstanceTypes, aws.InstanceType{Name: t.Name, GPUModel: t.GPUModel, GPUs: t.GPUs,
			OnDemandPrice: t.OnDemandPrice, InterruptionRate: t.InterruptionRate})
	}
	return opts
}

func buildGCP(ctx context.Context, pc ProviderConfig, log *slog.Logger) (providers.Provider, func() error, error) {
	var copts []option.ClientOption
	if pc.Endpoint != "" {
		copts = append(copts, option.WithEndpoint(pc.Endpoint), option.WithoutAuthentication())
	}
	client, err := compute.NewInstancesRESTClient(ctx, copts...)
	if err != nil {
		return nil, nil, fmt.Errorf("gcp client: %w", err)
	}
	p, err := gcp.New(client, gcpOptions(pc, log))
	return p, client.Close, err
}

func gcpOptions(pc ProviderConfig, log *slog.Logger) gcp.Options {
	opts := gcp.Options{Name: pc.name(), Project: pc.Project, Zones: pc.Zones, Image: pc.Image, DiskSizeGB: pc.DiskSizeGB,
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

func buildFake(pc ProviderConfig, hooks fullstack.FakeHooks, log *slog.Logger) (*fake.Provider, error) {
	now := time.Now()
	opts := fake.Options{Name: pc.name(), BootDelay: pc.BootDelay.Duration, NoticeLead: pc.NoticeLead.Duration,
		TraceStart: now.Add(-pc.TraceOffset.Duration), Log: log,
		OnRunning: hooks.OnRunning, OnNotice: hooks.OnNotice, OnTerminated: hooks.OnTerminated}
	opts.Pools = fakePools(pc)
	for i, pl := range pc.Pools {
		if pl.Trace != "" {
			tr, err := spotpolicy.LoadTrace(pl.Trace)
			if err != nil {
				return nil, fmt.Errorf("pools[%d].trace: %w", i, err)
			}
			opts.Pools[i].Trace = rescalePrices(tr, pl.PricePerHour)
		}
	}
	return fake.New(opts)
}

// fakePools are a fake provider's pools, without their traces.
func fakePools(pc ProviderConfig) []fake.Pool {
	var out []fake.Pool
	for _, pl := range pc.Pools {
		out = append(out, fake.Pool{Name: pl.Name, Zone: pl.Zone, InstanceType: pl.InstanceType, GPUModel: pl.GPUModel, GPUs: pl.GPUs,
			CapacityType: gangway.CapacityType(pl.CapacityType), PricePerHour: pl.PricePerHour,
			MaxInstances: pl.MaxInstances, TraceScale: pl.TraceScale, InterruptionRate: pl.InterruptionRate})
	}
	return out
}

// onDemandPrices maps each spot pool the providers can offer to the
// on-demand price per GPU-hour of the same instance type, for the "spot
// saved" column of `gangway cost`; each provider package prices its own
// (aws, gcp and fake OnDemandPrices), from config alone.
func (c CloudConfig) onDemandPrices() map[string]float64 {
	out := map[string]float64{}
	for _, p := range c.Providers {
		switch p.Type {
		case providerAWS:
			maps.Copy(out, aws.OnDemandPrices(awsOptions(p, nil)))
		case providerGCP:
			maps.Copy(out, gcp.OnDemandPrices(gcpOptions(p, nil)))
		case providerFake:
			maps.Copy(out, fake.OnDemandPrices(fake.Options{Name: p.name(), Pools: fakePools(p)}))
		}
	}
	return out
}

// rescalePrices scales a trace's prices so their mean is price (when both
// are set): the shared traces price a 1 × V100 instance, a pool of
// 8 × A100 keeps their movement at its own level.
func rescalePrices(tr *spotpolicy.Trace, price float64) *spotpolicy.Trace {
	mean, ok := tr.MeanPrice()
	if !ok || price <= 0 || mean <= 0 {
		return tr
	}
	out := *tr
	out.Prices = make([]float64, len(tr.Prices))
	for i, p := range tr.Prices {
		out.Prices[i] = p * price / mean
	}
	return &out
}

// join is the join section as launched instances' agents are given it.
func (j JoinConfig) join() providers.Join {
	return providers.Join{TemporalAddress: j.TemporalAddress, RedisURL: j.RedisURL,
		Binary: j.Binary, DataDir: j.DataDir, FakeGPUs: j.FakeGPUs, Args: j.Args}
}

// joinConfig is what launched instances' agents are given: the join
// section, with the server's own Temporal and Redis where it names none.
func joinConfig(c Config) providers.Join {
	out := c.Cloud.Join.join()
	out.Namespace = c.Temporal.Namespace
	if out.TemporalAddress == "" {
		out.TemporalAddress = c.Temporal.Address
	}
	if out.RedisURL == "" {
		out.RedisURL = c.Redis.URL
	}
	return out
}
