package bench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gangwayhq/gangway/internal/bench"
	"github.com/gangwayhq/gangway/internal/config"
)

// TestRunOnRealServers runs a short benchmark on a real redis-server and
// Temporal dev server down each submit path: every job submitted starts
// and finishes, and the step's numbers come from what it measured.
func TestRunOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a Temporal dev server")
	}
	for _, via := range []string{bench.ViaAPI, bench.ViaTemporal} {
		t.Run(via, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			d, err := config.Default().Server.Dispatch(0, nil)
			if err != nil {
				t.Fatal(err)
			}
			o := bench.Options{
				Dir: t.TempDir(), Nodes: 20, GPUsPerNode: 8, Rates: []float64{5}, Duration: 2 * time.Second,
				Command: []string{"true"}, LatencyLimit: 5 * time.Second, Drain: 30 * time.Second,
				Via: via, FleetCheck: true, Idle: time.Second, Dispatch: d,
			}
			res, err := bench.Run(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Via != via {
				t.Errorf("via %q, want %q", res.Via, via)
			}
			if res.Submitted != 10 || res.SubmitErrors != 0 || res.Started != res.Submitted {
				t.Fatalf("submitted %d (errors %d), started %d; want 10, 0, 10", res.Submitted, res.SubmitErrors, res.Started)
			}
			if !(res.LatencyP50S > 0 && res.LatencyP50S <= res.LatencyP99S && res.LatencyP99S <= res.LatencyMaxS) {
				t.Errorf("latencies p50 %g p99 %g max %g: want 0 < p50 ≤ p99 ≤ max", res.LatencyP50S, res.LatencyP99S, res.LatencyMaxS)
			}
			if res.HistoryEvents == 0 || res.CPU["temporal"] <= 0 || res.CPU["gangway"] <= 0 {
				t.Errorf("history events %d, CPU %v: want a finished job's history and CPU for every server", res.HistoryEvents, res.CPU)
			}
		})
	}
}

// TestOptionsNameWhatIsWrong: a bad path or a fleet check the path cannot
// skip is named by its flag.
func TestOptionsNameWhatIsWrong(t *testing.T) {
	ok := bench.Options{Nodes: 1, GPUsPerNode: 8, Rates: []float64{1}, Duration: time.Second,
		Command: []string{"true"}, LatencyLimit: time.Second, Via: bench.ViaAPI, FleetCheck: true}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*bench.Options)
		want string
	}{
		{"unknown path", func(o *bench.Options) { o.Via = "grpc" }, `--via must be api or temporal, got "grpc"`},
		{"no fleet check through the API", func(o *bench.Options) { o.FleetCheck = false }, "--fleet-check=false needs --via temporal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	direct := ok
	direct.Via, direct.FleetCheck = bench.ViaTemporal, false
	if err := direct.Validate(); err != nil {
		t.Errorf("--via temporal --fleet-check=false: %v", err)
	}
}
