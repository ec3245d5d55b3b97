package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
	"github.com/gangwayhq/gangway/providers"
)

// The fake cloud of `gangway dev`.
const (
	// devBurstAfter is short so that the demo's short jobs burst: the
	// default (10m) is for real fleets.
	devBurstAfter = 15 * time.Second
	// devOnPremPrice is the amortized price of the simulated H100s when the
	// config gives none (an 8 × H100 server over four years, with power).
	devOnPremPrice = 2.5
	// devSpotTrace is the trace the spot pool follows when present and
	// --spot-trace names none, relative to the repository root.
	devSpotTrace = "../shared/traces/spot/preemption/1-node/aws-04-22-2023/us-west-2b_v100_1.json"
)

// devCloud is the cloud section `gangway dev` runs: the config's own
// providers if it names any, else a fake cloud with a spot and an
// on-demand pool of 8 × A100 instances.
func devCloud(c CloudConfig, o devOptions) (CloudConfig, error) {
	out := c
	out.OnPremPricePerGPUHour = maps.Clone(c.OnPremPricePerGPUHour)
	if len(out.OnPremPricePerGPUHour) == 0 {
		out.OnPremPricePerGPUHour = map[string]float64{"onprem": devOnPremPrice}
	}
	switch {
	case !o.cloud:
		out.Providers = nil
		return out, nil
	case len(c.Providers) > 0:
		var errs []error
		out.validate(func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
		})
		if err := errors.Join(errs...); err != nil {
			return CloudConfig{}, fmt.Errorf("invalid cloud config:\n%w", err)
		}
		return out, nil
	}
	spot := FakePoolConfig{Name: "fake-a100-spot", Zone: "fake-1a", InstanceType: "a100x8", GPUModel: "A100", GPUs: 8,
		CapacityType: string(gangway.CapacitySpot), PricePerHour: 12, MaxInstances: 4}
	onDemand := FakePoolConfig{Name: "fake-a100-on-demand", Zone: "fake-1a", InstanceType: "a100x8", GPUModel: "A100", GPUs: 8,
		CapacityType: string(gangway.CapacityOnDemand), PricePerHour: 32.77, MaxInstances: 4}
	p := ProviderConfig{Name: "fake", Type: providerFake, BootDelay: gangway.Duration{Duration: 2 * time.Second}}
	trace := o.spotTrace
	if trace == "" {
		trace = findDevTrace()
	}
	if trace != "" {
		tr, err := spotpolicy.LoadTrace(trace)
		if err != nil {
			return CloudConfig{}, fmt.Errorf("--spot-trace: %w", err)
		}
		// One trace unit stands for four instances; the demo starts where
		// the trace has spot capacity longest, so it is not preempted.
		spot.Trace, spot.TraceScale, spot.MaxInstances = trace, 4, 0
		p.TraceOffset = gangway.Duration{Duration: time.Duration(longestAvailable(tr)) * tr.Gap}
	}
	p.Pools = []FakePoolConfig{spot, onDemand}
	out.Providers = []ProviderConfig{p}
	return out, nil
}

// findDevTrace looks for the default spot trace beside the working
// directory and beside the binary (bin/gangway in the repository).
func findDevTrace() string {
	candidates := []string{devSpotTrace}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "..", devSpotTrace))
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	return ""
}

// longestAvailable is the first tick of the trace's longest run of ticks
// with spot capacity.
func longestAvailable(tr *spotpolicy.Trace) int {
	best, bestAt, run := 0, 0, 0
	for i, n := range tr.Available {
		if n == 0 {
			run = 0
			continue
		}
		run++
		if run > best {
			best, bestAt = run, i-run+1
		}
	}
	return bestAt
}

// describeCloud says what the cloud offers, a line per offer.
func describeCloud(ctx context.Context, s *cloudSetup) []string {
	offers, err := s.Registry.Offers(ctx)
	if err != nil || len(offers) == 0 {
		return []string{"no cloud: jobs never burst"}
	}
	var lines []string
	for _, o := range offers {
		lines = append(lines, fmt.Sprintf("cloud pool %s: %d×%s %s at $%.2f/h ($%.2f per GPU-hour)",
			o.Pool, o.GPUsPerInstance, o.GPUModel, o.CapacityType, o.PricePerHour, o.PricePerGPUHour()))
	}
	return lines
}

// reportLeftovers says whether any cloud instance outlived the demo,
// giving terminations a few seconds to land.
func reportLeftovers(ctx context.Context, s *cloudSetup, out io.Writer) {
	if len(s.Registry.Names()) == 0 {
		return
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var left []string
		for _, p := range s.Registry.Providers() {
			insts, err := p.ListByTag(ctx, providers.TagJob, "")
			if err != nil {
				left = append(left, fmt.Sprintf("%s (cannot list: %v)", p.Name(), err))
				continue
			}
			for _, in := range insts {
				left = append(left, fmt.Sprintf("%s/%s (job %s)", p.Name(), in.ID, in.Tags[providers.TagJob]))
			}
		}
		if len(left) == 0 {
			fmt.Fprintln(out, "\ncloud: no instance left running")
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fmt.Fprintf(out, "\ncloud: %d instances still running: %s (the reconciler terminates orphans after a minute)\n",
				len(left), strings.Join(left, ", "))
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}
