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
		errs = append(errs, &InputError{"tune", fmt.Errorf("%g: want a positive multiple of GPU capacity", c.TuneRatio)})
	}
	if c.Workload != "" && c.Workload != WorkloadTypical && c.Workload != WorkloadAll {
		errs = append(errs, &InputError{"workload", fmt.Errorf("%q: want %q or %q", c.Workload, WorkloadTypical, WorkloadAll)})
	}
	if c.Parallel < 0 {
		errs = append(errs, &InputError{"parallel", fmt.Errorf("%d: want 0 (GOMAXPROCS) or more", c.Parallel)})
	}
	return errors.Join(append(errs, validatePolicies(c.Policies, c.NewScorer))...)
}

// Validate checks the dynamic replay's settings (not its nodes or jobs).
func (c TraceConfig) Validate() error {
	var errs []error
	if c.Speedup < 0 || !finite(c.Speedup) {
		errs = append(errs, &InputError{"speedup", fmt.Errorf("%g: want a positive factor", c.Speedup)})
	}
	if c.CheckpointEvery < 0 {
		errs = append(errs, &InputError{"checkpoint", fmt.Errorf("%s: want 0 (none) or more", c.CheckpointEvery)})
	}
	if c.Parallel < 0 {
		errs = append(errs, &InputError{"parallel", fmt.Errorf("%d: want 0 (GOMAXPROCS) or more", c.Parallel)})
	}
	return errors.Join(append(append(errs, validateOptions(c.Options)...), validatePolicies(c.Policies, c.NewScorer))...)
}

// Validate checks the scale benchmark's settings (not its fleets or queues).
func (c ScaleConfig) Validate() error {
	var errs []error
	if c.Busy < 0 || c.Busy >= 1 || math.IsNaN(c.Busy) {
		errs = append(errs, &InputError{"busy", fmt.Errorf("%g: want a share from 0 to below 1", c.Busy)})
	}
	if c.Repeat < 0 {
		errs = append(errs, &InputError{"repeat", fmt.Errorf("%d: want 1 or more", c.Repeat)})
	}
	return errors.Join(append(append(errs, validateOptions(c.Options)...), validatePolicies(c.Policies, c.NewScorer))...)
}

// validateOptions checks the engine options a replay takes from its flags.
func validateOptions(o placement.Options) []error {
	var errs []error
	if o.Reservations < 0 {
		errs = append(errs, &InputError{"reservations", fmt.Errorf("%d: want 0 (off) or more", o.Reservations)})
	}
	if o.SampleNodes < 0 {
		errs = append(errs, &InputError{"sample-nodes", fmt.Errorf("%d: want 0 (all) or more", o.SampleNodes)})
	}
	if o.MinRuntime < 0 {
		errs = append(errs, &InputError{"min-runtime", fmt.Errorf("%s: want 0 or more", o.MinRuntime)})
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
