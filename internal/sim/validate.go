package sim

import (
	"errors"
	"fmt"
	"math"

	"github.com/gangwayhq/gangway/placement"
)

// The Validate methods check a replay's settings before any trace is read.
// Each error is an *InputError whose Field is the setting's name as
// `gangway replay` spells its flag, so the command can say "--speedup".

// Validate checks the FGD protocol's settings (not its nodes or tasks).
func (c FGDConfig) Validate() error {
	var errs []error
	if c.TuneRatio < 0 || !finite(c.TuneRatio) {
		errs = append(errs, &InputError{"tune", fmt.Errorf("want a positive multiple of GPU capacity, got %g", c.TuneRatio)})
	}
	if c.Workload != "" && c.Workload != WorkloadTypical && c.Workload != WorkloadAll {
		errs = append(errs, &InputError{"workload", fmt.Errorf("want %q or %q, got %q", WorkloadTypical, WorkloadAll, c.Workload)})
	}
	if c.Parallel < 0 {
		errs = append(errs, &InputError{"parallel", fmt.Errorf("want 0 (GOMAXPROCS) or more, got %d", c.Parallel)})
	}
	return errors.Join(append(errs, validatePolicies(c.Policies, c.NewScorer))...)
}

// Validate checks the dynamic replay's settings (not its nodes or jobs).
func (c TraceConfig) Validate() error {
	var errs []error
	if c.Speedup < 0 || !finite(c.Speedup) {
		errs = append(errs, &InputError{"speedup", fmt.Errorf("want a positive factor, got %g", c.Speedup)})
	}
	if c.CheckpointEvery < 0 {
		errs = append(errs, &InputError{"checkpoint", fmt.Errorf("want 0 (none) or more, got %s", c.CheckpointEvery)})
	}
	if c.Parallel < 0 {
		errs = append(errs, &InputError{"parallel", fmt.Errorf("want 0 (GOMAXPROCS) or more, got %d", c.Parallel)})
	}
	if d := c.Defrag; d.Enabled {
		if d.MaxMovesPerHour < 1 {
			errs = append(errs, &InputError{"defrag-moves", fmt.Errorf("want 1 or more moves an hour, got %d", d.MaxMovesPerHour)})
		}
		if !(d.MaxLostGPUSecondsPerHour > 0) || !finite(d.MaxLostGPUSecondsPerHour) {
			errs = append(errs, &InputError{"defrag-lost", fmt.Errorf("want a positive number of GPU-seconds an hour, got %g", d.MaxLostGPUSecondsPerHour)})
		}
		if d.RestartOverhead < 0 {
			errs = append(errs, &InputError{"defrag-restart", fmt.Errorf("want 0 or more, got %s", d.RestartOverhead)})
		}
		if c.CheckpointEvery <= 0 {
			errs = append(errs, &InputError{"checkpoint", errors.New("--defrag moves only jobs that checkpoint: want an interval above 0")})
		}
	}
	if b := c.Burst; b != nil {
		if !(b.PricePerGPUHour > 0) || !finite(b.PricePerGPUHour) {
			errs = append(errs, &InputError{"burst-price", fmt.Errorf("want a positive price per GPU-hour, got %g", b.PricePerGPUHour)})
		}
		if b.After < 0 {
			errs = append(errs, &InputError{"burst-after", fmt.Errorf("want 0 or more, got %s", b.After)})
		}
		if b.Boot < 0 {
			errs = append(errs, &InputError{"burst-boot", fmt.Errorf("want 0 or more, got %s", b.Boot)})
		}
		if c.ETA == nil {
			errs = append(errs, &InputError{"burst-price", errors.New("bursting is replayed with --eta: jobs declare limits and the estimators learn")})
		}
		if c.Defrag.Enabled {
			errs = append(errs, &InputError{"burst-price", errors.New("not with --defrag: replay one comparison at a time")})
		}
	}
	return errors.Join(append(append(errs, validateOptions(c.Options)...), validatePolicies(c.Policies, c.NewScorer))...)
}

// Validate checks the scale benchmark's settings (not its fleets or queues).
func (c ScaleConfig) Validate() error {
	var errs []error
	if c.Busy < 0 || c.Busy >= 1 || math.IsNaN(c.Busy) {
		errs = append(errs, &InputError{"busy", fmt.Errorf("want a share from 0 to below 1, got %g", c.Busy)})
	}
	if c.Repeat < 0 {
		errs = append(errs, &InputError{"repeat", fmt.Errorf("want 1 or more, got %d", c.Repeat)})
	}
	return errors.Join(append(append(errs, validateOptions(c.Options)...), validatePolicies(c.Policies, c.NewScorer))...)
}

// Validate checks the spot replay's settings (not its traces).
func (c SpotConfig) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &InputError{field, fmt.Errorf(format, args...)})
	}
	j := c.Job
	switch {
	case j.Work <= 0:
		bad("duration", "want a positive duration, got %v", j.Work)
	case j.Overhead < 0:
		bad("overhead", "want 0 or more, got %v", j.Overhead)
	case j.Deadline < j.Work+j.Overhead:
		bad("deadline", "%v is shorter than --duration %v plus one --overhead %v, so no policy can meet it", j.Deadline, j.Work, j.Overhead)
	}
	if c.Jobs < 1 {
		bad("jobs", "want 1 or more, got %d", c.Jobs)
	}
	if j.Instances < 0 {
		bad("instances", "want 1 or more, or 0 for each trace's pool size, got %d", j.Instances)
	}
	if c.ZoneMove < 0 {
		bad("zone-move", "want 0 or more, got %v", c.ZoneMove)
	}
	if !(c.OnDemandPrice > 0) || !finite(c.OnDemandPrice) {
		bad("on-demand-price", "want a positive price, got %g", c.OnDemandPrice)
	}
	if !(c.SpotFraction > 0) || !finite(c.SpotFraction) {
		bad("spot-fraction", "want a positive share of the on-demand price, got %g", c.SpotFraction)
	}
	if len(c.Policies) == 0 {
		bad("policies", "want at least one policy")
	}
	return errors.Join(errs...)
}

// validateOptions checks the engine options a replay takes from its flags.
func validateOptions(o placement.Options) []error {
	var errs []error
	if o.Reservations < 0 {
		errs = append(errs, &InputError{"reservations", fmt.Errorf("want 0 (off) or more, got %d", o.Reservations)})
	}
	if o.SampleNodes < 0 {
		errs = append(errs, &InputError{"sample-nodes", fmt.Errorf("want 0 (all) or more, got %d", o.SampleNodes)})
	}
	if o.MinRuntime < 0 {
		errs = append(errs, &InputError{"min-runtime", fmt.Errorf("want 0 or more, got %s", o.MinRuntime)})
	}
	return errs
}

// validatePolicies makes every policy's scorer once, so a bad name fails
// before any work.
func validatePolicies(policies []string, newScorer func(string) (placement.Scorer, error)) error {
	if len(policies) == 0 {
		return &InputError{"policies", errors.New("want at least one policy")}
	}
	if newScorer == nil {
		return errors.New("no scorer factory")
	}
	for _, p := range policies {
		if _, err := newScorer(p); err != nil {
			return &InputError{"policies", err}
		}
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Validate checks a sweep's settings: the FGD protocol's and every
// point's mix.
func (c SweepConfig) Validate() error {
	errs := []error{c.FGDConfig.Validate()}
	for _, p := range c.Points {
		errs = append(errs, p.Mix().Validate())
	}
	return errors.Join(errs...)
}
