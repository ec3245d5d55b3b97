package fullstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"google.golang.org/api/option"

	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/config"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/aws"
	"github.com/gangwayhq/gangway/providers/fake"
	"github.com/gangwayhq/gangway/providers/gcp"
)

// ProviderSpec is one provider of a Cloud: exactly one of AWS, GCP and
// Fake is set.
type ProviderSpec struct {
	AWS  *aws.Options
	GCP  *gcp.Options
	Fake *fake.Options
	// Endpoint, for AWS and GCP, sends the API calls there without
	// credentials instead of to the cloud: a fake API or a test server.
	Endpoint string
	// FakeTraces name, per pool of Fake, a spot trace file the pool's
	// availability and prices follow ("" or missing: none). Its prices are
	// scaled to the pool's PricePerHour: the shared traces price a
	// 1 × V100 instance.
	FakeTraces []string
}

func (s ProviderSpec) name() string {
	switch {
	case s.AWS != nil:
		return s.AWS.Name
	case s.GCP != nil:
		return s.GCP.Name
	case s.Fake != nil:
		return s.Fake.Name
	}
	return ""
}

// ProviderError is why BuildCloud could not build specs[Index].
type ProviderError struct {
	Index int
	Name  string
	Err   error
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("providers[%d] (%s): %v", e.Index, e.Name, e.Err)
}

func (e *ProviderError) Unwrap() error { return e.Err }

// BuildCloud builds the providers, the fakes among them calling hooks, and
// a registry over them. ctx bounds loading cloud credentials only.
func BuildCloud(ctx context.Context, specs []ProviderSpec, ro cloud.RegistryOptions, hooks FakeHooks) (*Cloud, error) {
	c := &Cloud{}
	var ps []providers.Provider
	for i, s := range specs {
		p, err := c.build(ctx, s, hooks)
		if err != nil {
			_ = c.Close()
			return nil, &ProviderError{Index: i, Name: s.name(), Err: err}
		}
		ps = append(ps, p)
	}
	reg, err := cloud.NewRegistry(ps, ro)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	c.Registry = reg
	return c, nil
}

// build builds one provider, adding what it needs closed or ticked to c.
func (c *Cloud) build(ctx context.Context, s ProviderSpec, hooks FakeHooks) (providers.Provider, error) {
	switch {
	case s.AWS != nil:
		cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(s.AWS.Region))
		if err != nil {
			return nil, fmt.Errorf("aws credentials: %w", err)
		}
		client := ec2.NewFromConfig(cfg, func(o *ec2.Options) {
			if s.Endpoint != "" {
				o.BaseEndpoint = awssdk.String(s.Endpoint)
				o.Credentials = awssdk.AnonymousCredentials{}
			}
		})
		return aws.New(client, *s.AWS)
	case s.GCP != nil:
		var copts []option.ClientOption
		if s.Endpoint != "" {
			copts = append(copts, option.WithEndpoint(s.Endpoint), option.WithoutAuthentication())
		}
		client, err := compute.NewInstancesRESTClient(ctx, copts...)
		if err != nil {
			return nil, fmt.Errorf("gcp client: %w", err)
		}
		c.Closers = append(c.Closers, client.Close)
		return gcp.New(client, *s.GCP)
	case s.Fake != nil:
		opts := *s.Fake
		opts.OnRunning, opts.OnNotice, opts.OnTerminated = hooks.OnRunning, hooks.OnNotice, hooks.OnTerminated
		opts.Pools = append([]fake.Pool(nil), opts.Pools...)
		for i, path := range s.FakeTraces {
			if path == "" || i >= len(opts.Pools) {
				continue
			}
			tr, err := spotpolicy.LoadTrace(path)
			if err != nil {
				return nil, fmt.Errorf("pools[%d].trace: %w", i, err)
			}
			opts.Pools[i].Trace = tr.ScalePrices(opts.Pools[i].PricePerHour)
		}
		f, err := fake.New(opts)
		if err != nil {
			return nil, err
		}
		c.Fakes = append(c.Fakes, f)
		return f, nil
	}
	return nil, fmt.Errorf("no provider type set")
}

// BuildConfiguredCloud builds the providers of a config's cloud section
// (BuildCloud over one ProviderSpec per cloud.providers entry); a provider
// that fails is named by its place in the config.
func BuildConfiguredCloud(ctx context.Context, c config.CloudConfig, hooks FakeHooks, log *slog.Logger) (*Cloud, error) {
	specs := make([]ProviderSpec, len(c.Providers))
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
			specs[i].Fake = &fake.Options{Name: pc.EffectiveName(), IDPrefix: pc.IDPrefix, BootDelay: pc.BootDelay.Duration, NoticeLead: pc.NoticeLead.Duration,
				TraceStart: time.Now().Add(-pc.TraceOffset.Duration), Log: plog, Pools: pc.FakePools()}
			for _, pl := range pc.Pools {
				specs[i].FakeTraces = append(specs[i].FakeTraces, pl.Trace)
			}
		}
	}
	s, err := BuildCloud(ctx, specs, cloud.RegistryOptions{OffersTTL: c.OffersTTL.Duration, Log: log}, hooks)
	if pe := (*ProviderError)(nil); errors.As(err, &pe) {
		return nil, fmt.Errorf("cloud.providers[%d] (%s): %w", pe.Index, pe.Name, pe.Err)
	}
	return s, err
}
