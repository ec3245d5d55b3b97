package spotpolicy_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

func TestParseTrace(t *testing.T) {
	tests := map[string]struct {
		json      string
		want      *spotpolicy.Trace
		wantErr   string
		wantRate  float64
		wantPrice float64
	}{
		"with prices": {
			json:     `{"metadata":{"gap_seconds":1800},"data":[1,0,1,1],"prices":[0.5,0.5,0.6,0.6]}`,
			want:     &spotpolicy.Trace{Name: "t.json", Gap: 30 * time.Minute, Available: []int{1, 0, 1, 1}, Prices: []float64{0.5, 0.5, 0.6, 0.6}},
			wantRate: 1.0 / 1.5, wantPrice: 0.55,
		},
		"without prices": {
			json: `{"metadata":{"gap_seconds":32},"data":[2,2]}`,
			want: &spotpolicy.Trace{Name: "t.json", Gap: 32 * time.Second, Available: []int{2, 2}},
		},
		"not json":        {json: `{"metadata":`, wantErr: "spot trace t.json: not valid JSON"},
		"data not ints":   {json: `{"metadata":{"gap_seconds":1},"data":["a"]}`, wantErr: "field data"},
		"no metadata":     {json: `{"data":[1]}`, wantErr: `missing "metadata"`},
		"zero gap":        {json: `{"metadata":{"gap_seconds":0},"data":[1]}`, wantErr: "metadata.gap_seconds must be positive, got 0"},
		"no data":         {json: `{"metadata":{"gap_seconds":1}}`, wantErr: `"data" is missing or empty`},
		"gap rounds to 0": {json: `{"metadata":{"gap_seconds":1e-10},"data":[1]}`, wantErr: "metadata.gap_seconds must be between 0.001 and 86400, got 1e-10"},
		"gap overflows":   {json: `{"metadata":{"gap_seconds":1e300},"data":[1]}`, wantErr: "metadata.gap_seconds must be between 0.001 and 86400, got 1e+300"},
		"negative":        {json: `{"metadata":{"gap_seconds":1},"data":[1,-1]}`, wantErr: "data[1] is -1"},
		"prices mismatch": {json: `{"metadata":{"gap_seconds":1},"data":[1,1],"prices":[1]}`, wantErr: "1 prices for 2 data ticks"},
		"negative price":  {json: `{"metadata":{"gap_seconds":1},"data":[1],"prices":[-2]}`, wantErr: "prices[0] is -2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := spotpolicy.ParseTrace(strings.NewReader(tc.json), "t.json")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("a parsed trace is invalid: %v", err)
			}
			if rate := got.InterruptionRate(); fmt.Sprintf("%.6f", rate) != fmt.Sprintf("%.6f", tc.wantRate) {
				t.Errorf("InterruptionRate = %v, want %v", rate, tc.wantRate)
			}
			if price, _ := got.MeanPrice(); fmt.Sprintf("%.6f", price) != fmt.Sprintf("%.6f", tc.wantPrice) {
				t.Errorf("MeanPrice = %v, want %v", price, tc.wantPrice)
			}
		})
	}
}

// TestTraceAt reads ticks by offset, before the start and past the end
// (a trace replays for ever).
func TestTraceAt(t *testing.T) {
	tr := &spotpolicy.Trace{Gap: time.Hour, Available: []int{3, 0, 1}, Prices: []float64{0.5, 0.6, 0.7}}
	type at struct {
		Tick, Available int
		Price           float64
		OK              bool
	}
	var got []at
	for _, off := range []time.Duration{0, 59 * time.Minute, time.Hour, 5 * time.Hour, -time.Minute, -time.Hour} {
		n, p, ok := tr.At(off)
		got = append(got, at{tr.Tick(off), n, p, ok})
	}
	want := []at{{0, 3, 0.5, true}, {0, 3, 0.5, true}, {1, 0, 0.6, true}, {5, 1, 0.7, true}, {-1, 1, 0.7, true}, {-1, 1, 0.7, true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("At (-want +got):\n%s", diff)
	}
	tr.Prices = nil
	if n, p, ok := tr.AtTick(3); n != 3 || p != 0 || ok {
		t.Errorf("AtTick(3) without prices = %d, %v, %v; want 3, 0, false", n, p, ok)
	}
	if got := tr.Availability(); got != 2.0/3 {
		t.Errorf("Availability = %v, want 2/3", got)
	}
}

// sharedTraces is where the shared spot traces are, from this package.
const sharedTraces = "../../../shared/traces/spot"

// TestLoadSharedTraces loads every shared spot trace.
func TestLoadSharedTraces(t *testing.T) {
	files, _ := filepath.Glob(sharedTraces + "/*/*/*/*.json")
	if len(files) == 0 {
		t.Skip("no shared spot traces at ../shared/traces/spot")
	}
	for _, f := range files {
		tr, err := spotpolicy.LoadTrace(f)
		if err != nil {
			t.Errorf("LoadTrace(%s): %v", f, err)
			continue
		}
		if tr.Name != filepath.Base(f) || tr.Validate() != nil {
			t.Errorf("%s: trace %q: %v", f, tr.Name, tr.Validate())
		}
	}
	if _, err := spotpolicy.LoadTrace(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadTrace(missing) = %v, want os.ErrNotExist", err)
	}
}

func TestTraceScalePrices(t *testing.T) {
	tests := map[string]struct {
		prices []float64
		price  float64
		want   []float64
	}{
		"scaled to the mean": {prices: []float64{1, 3}, price: 10, want: []float64{5, 15}},
		"no prices":          {prices: nil, price: 10, want: nil},
		"no price":           {prices: []float64{1, 3}, price: 0, want: []float64{1, 3}},
		// A constant trace's mean is not its price to the last bit.
		"constant, exactly the price": {prices: slices.Repeat([]float64{0.918}, 5000), price: 12, want: slices.Repeat([]float64{12}, 5000)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr := &spotpolicy.Trace{Gap: time.Minute, Available: make([]int, len(tc.prices)), Prices: tc.prices}
			got := tr.ScalePrices(tc.price)
			if diff := cmp.Diff(tc.want, got.Prices); diff != "" {
				t.Errorf("prices (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.prices, tr.Prices); diff != "" {
				t.Errorf("the trace itself changed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTraceLongestAvailable(t *testing.T) {
	tests := map[string]struct {
		available []int
		want      int
	}{
		"longest run later": {available: []int{1, 0, 2, 2, 1, 0, 1}, want: 2},
		"first of equals":   {available: []int{1, 1, 0, 1, 1}, want: 0},
		"none available":    {available: []int{0, 0}, want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr := &spotpolicy.Trace{Gap: time.Minute, Available: tc.available}
			if got := tr.LongestAvailable(); got != tc.want {
				t.Errorf("LongestAvailable() = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestTraceDescription: what a trace was recorded for comes from its
// metadata, else from its path in the layout of skypilot-org/spot-traces.
func TestTraceDescription(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, body string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	type desc struct {
		Zone, Device, Type string
		Nodes, Pool        int
		OnDemand           float64
		Known              bool
	}
	tests := map[string]struct {
		path, body string
		want       desc
	}{
		"1-node v100: a p3.2xlarge at list price": {
			path: "availability/1-node/aws-02-15-2023/us-east-1a_v100_1.json", body: `{"metadata":{"gap_seconds":1},"data":[1,0]}`,
			want: desc{"us-east-1a", "v100_1", "p3.2xlarge", 1, 1, 3.06, true},
		},
		"16-node pool": {
			path: "availability/16-nodes/aws-08-27-2023/us-west-2a_v100_1.json", body: `{"metadata":{"gap_seconds":1},"data":[3,16]}`,
			want: desc{"us-west-2a", "v100_1", "p3.2xlarge", 16, 16, 3.06, true},
		},
		"8 × K80": {
			path: "1-node/us-west-2b_k80_8.json", body: `{"metadata":{"gap_seconds":1},"data":[1]}`,
			want: desc{"us-west-2b", "k80_8", "p2.8xlarge", 1, 1, 7.2, true},
		},
		"metadata wins over the path": {
			path: "4-node/us-east-1a_v100_1.json",
			body: `{"metadata":{"gap_seconds":1,"zone":"z9","device":"a100_8","instance_type":"p4d.24xlarge","nodes":2,"on_demand_price":32.77},"data":[1]}`,
			want: desc{"z9", "a100_8", "p4d.24xlarge", 2, 2, 32.77, true},
		},
		"price_info's on-demand price": {
			path: "x/region_0_v100_1.json", body: `{"metadata":{"gap_seconds":1,"price_info":{"on_demand_price":3.5}},"data":[1]}`,
			want: desc{"region", "0_v100_1", "", 0, 1, 3.5, true},
		},
		"a GCP zone is not priced from the AWS table": {
			path: "gcp/us-central1-c_c3-88.json", body: `{"metadata":{"gap_seconds":1},"data":[1]}`,
			want: desc{"us-central1-c", "c3-88", "", 0, 1, 0, false},
		},
		"no pool directory: the most instances seen": {
			path: "plain.json", body: `{"metadata":{"gap_seconds":1},"data":[0,2,4,1]}`,
			want: desc{"", "", "", 0, 4, 0, false},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr, err := spotpolicy.LoadTrace(write(tc.path, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			od, known := tr.OnDemandFor()
			got := desc{tr.Zone, tr.Device, tr.InstanceType, tr.Nodes, tr.PoolSize(), od, known}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, body := range []string{
		`{"metadata":{"gap_seconds":1,"on_demand_price":-1},"data":[1]}`,
		`{"metadata":{"gap_seconds":1,"nodes":-4},"data":[1]}`,
	} {
		if _, err := spotpolicy.ParseTrace(strings.NewReader(body), "bad.json"); err == nil {
			t.Errorf("ParseTrace(%s) accepted it", body)
		}
	}
}

// A trace whose ticks add up past what a time.Duration holds is refused,
// rather than having a negative length.
func TestParseTraceTooLong(t *testing.T) {
	data := strings.Repeat("1,", 40000) + "1"
	_, err := spotpolicy.ParseTrace(strings.NewReader(`{"metadata":{"gap_seconds":86400},"data":[`+data+`]}`), "t.json")
	const want = "spot trace t.json: 40001 data ticks of 86400s cover more than 100 years"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}
