package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/config"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/providers/fake"
)

// buildCloud builds the configured providers (fullstack.BuildCloud).
// ctx bounds loading cloud credentials only.
func buildCloud(ctx context.Context, c config.CloudConfig, hooks fullstack.FakeHooks, log *slog.Logger) (*fullstack.Cloud, error) {
	specs := make([]fullstack.ProviderSpec, len(c.Providers))
	for i, pc := range c.Providers {
		plog := log.With("provider", pc.EffectiveName())
		specs[i].Endpoint = pc.Endpoint
		switch pc.Type {
		case config.ProviderAWS:
			o := pc.AWSOptions(plog)
			specs[i].AWS = &o
		case config.ProviderGCP:
			o := pc.GCPOptions(plog)
			specs[i].GCP = &o
		case config.ProviderFake:
			specs[i].Fake = &fake.Options{Name: pc.EffectiveName(), BootDelay: pc.BootDelay.Duration, NoticeLead: pc.NoticeLead.Duration,
				TraceStart: time.Now().Add(-pc.TraceOffset.Duration), Log: plog, Pools: pc.FakePools()}
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
