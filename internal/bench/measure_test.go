package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestQuantile(t *testing.T) {
	vals := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := map[string]struct {
		vals []float64
		q    float64
		want float64
	}{
		"none":   {nil, 0.5, 0},
		"median": {vals, 0.5, 5},
		"p99":    {vals, 0.99, 10},
		"max":    {vals, 1, 10},
		"min":    {vals, 0, 1},
		"one":    {[]float64{3}, 0.99, 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := quantile(tc.vals, tc.q); got != tc.want {
				t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestPeakRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	tests := map[string]struct {
		starts []time.Time
		window time.Duration
		want   float64
	}{
		"none":              {nil, time.Second, 0},
		"burst in a window": {at(0, 100, 200, 300, 5000), time.Second, 4},
		"spread":            {at(0, 1000, 2000, 3000), time.Second, 1},
		"5s window":         {at(0, 1000, 2000, 3000, 4000, 4999, 9000), 5 * time.Second, 6.0 / 5},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := peakRate(tc.starts, tc.window); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("peakRate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := histogram{bounds: []float64{0.01, 0.02, 0.04, inf}, counts: []float64{5, 5, 5, 5}, count: 5}
	after := histogram{bounds: before.bounds, counts: []float64{5, 55, 105, 106}, count: 106}
	d := after.minus(before)
	if d.count != 101 {
		t.Fatalf("count = %v, want 101", d.count)
	}
	tests := map[string]struct {
		q    float64
		want float64
	}{
		// 50 observations in (0.01, 0.02], 50 in (0.02, 0.04], 1 above.
		"p50 just past the second bucket":      {0.5, 0.02 + 0.02*0.5/50},
		"p99 near the top of the third":        {0.99, 0.02 + 0.02*(99.99-50)/50},
		"p100 in +Inf reports its lower bound": {1, 0.04},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := d.quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
	if got := (histogram{}).quantile(0.5); got != 0 {
		t.Errorf("empty histogram quantile = %v, want 0", got)
	}
}

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis, as the kernel allows.
	line := "4242 (temporal (x) y) S 1 2 3 4 5 6 7 8 9 10 250 150 30 20 20 0 1 0 100 1000 50"
	u, s, cu, cs, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float64{2.5, 1.5, 0.3, 0.2}, []float64{u, s, cu, cs}); diff != "" {
		t.Errorf("cpu (-want +got):\n%s", diff)
	}
	if _, _, _, _, err := parseStat("4242 (short) S 1 2"); err == nil || !strings.Contains(err.Error(), "fields") {
		t.Errorf("short line: err = %v, want one naming the fields", err)
	}
	if _, _, _, _, err := procCPU("self"); err != nil {
		t.Errorf("own /proc stat: %v", err)
	}
}

func TestParseRatesAndValidate(t *testing.T) {
	rates, err := ParseRates("5, 10,20.5")
	if err != nil || !cmp.Equal(rates, []float64{5, 10, 20.5}) {
		t.Errorf("ParseRates = %v, %v", rates, err)
	}
	if _, err := ParseRates("5,,x"); err == nil || !strings.Contains(err.Error(), `""`) {
		t.Errorf("ParseRates of a bad list: err = %v, want one naming the bad part", err)
	}
	good := Options{Nodes: 10, GPUsPerNode: 8, Rates: []float64{5, 10}, Sweep: true, Duration: 10 * time.Second,
		Command: []string{"true"}, LatencyLimit: time.Second, Via: ViaAPI, FleetCheck: true}
	if err := good.Validate(); err != nil {
		t.Errorf("good options: %v", err)
	}
	bad := good
	bad.Nodes, bad.Rates, bad.Duration, bad.Command = 0, []float64{10, 5}, 0, nil
	err = bad.Validate()
	for _, want := range []string{"--nodes", "--sweep needs rising", "--duration", "--command"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to name %s", err, want)
		}
	}
}
