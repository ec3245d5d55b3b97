package sim

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

// TestValidateNamesEachBadSetting checks that every bad setting is
// reported, each as an *InputError naming its flag, and that good settings
// (zero values meaning the defaults included) pass.
func TestValidateNamesEachBadSetting(t *testing.T) {
	scorers := baselines.ScorerByName
	tests := map[string]struct {
		cfg  interface{ Validate() error }
		want []string // fields, in order; nil: valid
	}{
		"fgd ok":       {cfg: FGDConfig{Policies: []string{"fgd"}, NewScorer: scorers}},
		"fgd all bad":  {cfg: FGDConfig{Policies: []string{"nope"}, NewScorer: scorers, TuneRatio: -1, Workload: "x", Parallel: -1}, want: []string{"tune", "workload", "parallel", "policies"}},
		"fgd nan tune": {cfg: FGDConfig{Policies: []string{"fgd"}, NewScorer: scorers, TuneRatio: math.NaN()}, want: []string{"tune"}},
		"trace ok":     {cfg: TraceConfig{Policies: []string{"gangway"}, NewScorer: scorers, Speedup: 10}},
		"trace all bad": {cfg: TraceConfig{NewScorer: scorers, Speedup: math.Inf(1), CheckpointEvery: -time.Second, Parallel: -1,
			Options: placement.Options{Reservations: -1, SampleNodes: -1, MinRuntime: -time.Second}},
			want: []string{"speedup", "checkpoint", "parallel", "reservations", "sample-nodes", "min-runtime", "policies"}},
		"scale ok":      {cfg: ScaleConfig{Policies: []string{"first-fit"}, NewScorer: scorers, Busy: 0.5}},
		"scale all bad": {cfg: ScaleConfig{Policies: []string{"first-fit"}, NewScorer: scorers, Busy: 1, Repeat: -1}, want: []string{"busy", "repeat"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var got []string
			if err != nil {
				for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
					ie := (*InputError)(nil)
					if !errors.As(e, &ie) {
						t.Fatalf("%v is not an *InputError", e)
					}
					got = append(got, ie.Field)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("bad fields %v, want %v (error: %v)", got, tc.want, err)
			}
		})
	}
}

// TestValidateBurst: a burst replay names what is wrong with its settings.
func TestValidateBurst(t *testing.T) {
	for _, tc := range []struct {
		cfg  TraceConfig
		want string
	}{
		{TraceConfig{Burst: &TraceBurst{PricePerGPUHour: 4}}, "--burst-price: bursting is replayed with --eta"},
		{TraceConfig{ETA: &ETAConfig{}, Burst: &TraceBurst{PricePerGPUHour: -1}}, "--burst-price: want a positive price per GPU-hour, got -1"},
		{TraceConfig{ETA: &ETAConfig{}, Burst: &TraceBurst{PricePerGPUHour: 4, After: -time.Minute}}, "--burst-after: want 0 or more, got -1m0s"},
		{TraceConfig{ETA: &ETAConfig{}, Burst: &TraceBurst{PricePerGPUHour: 4, Boot: -time.Second}}, "--burst-boot: want 0 or more, got -1s"},
		{TraceConfig{ETA: &ETAConfig{}, Burst: &TraceBurst{PricePerGPUHour: 4}, CheckpointEvery: time.Minute,
			Defrag: placement.Defrag{Enabled: true, MaxMovesPerHour: 1, MaxLostGPUSecondsPerHour: 1}}, "--burst-price: not with --defrag"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(FlagErrors(err).Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want it to say %q", tc.cfg.Burst, err, tc.want)
		}
	}
}
