package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/aws"
	"github.com/gangwayhq/gangway/providers/fake"
	"github.com/gangwayhq/gangway/providers/gcp"
)

// buildCloud builds the configured providers (fullstack.BuildCloud).
// ctx bounds loading cloud credentials only.
func buildCloud(ctx context.Context, c CloudConfig, hooks fullstack.FakeHooks, log *slog.Logger) (*fullstack.Cloud, error) {
	specs := make([]fullstack.ProviderSpec, len(c.Providers))
	for i, pc := range c.Providers {
		plog := log.With("provider", pc.name())
		specs[i].Endpoint = pc.Endpoint
		switch pc.Type {
		case providerAWS:
			o := awsOptions(pc, plog)
			specs[i].AWS = &o
		case providerGCP:
			o := gcpOptions(pc, plog)
			specs[i].GCP = &o
		case providerFake:
			specs[i].Fake = &fake.Options{Name: pc.name(), BootDelay: pc.BootDelay.Duration, NoticeLead: pc.NoticeLead.Duration,
				TraceStart: time.Now().Add(-pc.TraceOffset.Duration), Log: plog, Pools: fakePools(pc)}
			for _, pl := range pc.Pools {
				specs[i].FakeTraces = append(specs[i].FakeTraces, pl.Trace)
			}
		}
	}
	s, err := fullstack.BuildCloud(ctx, specs, cloud.RegistryOptions{OffersTTL: c.OffersTTL.Duration, Log: log}, hooks)
	if pe := (*fullstack.ProviderError)(nil); errors.As(err, &pe) {
		return nil, fmt.Errorf("cloud.providers[%d] (%s): %w", pe.Index, pe.Name, pe.Err)
	}
	return s, err
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
