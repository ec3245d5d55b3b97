package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// runSpotCmd runs `gangway replay spot args...` in-process and returns
// its stdout and stderr apart.
func runSpotCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	clearEnv(t)
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"replay", "spot"}, args...))
	err = root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// writeSpotTrace writes a trace in the format of ../shared/traces/spot.
func writeSpotTrace(t *testing.T, path string, gapSeconds float64, data []int, prices []float64) {
	t.Helper()
	raw := map[string]any{"metadata": map[string]any{"gap_seconds": gapSeconds}, "data": data}
	if prices != nil {
		raw["prices"] = prices
	}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func fill[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// spotTraceDir holds two 20-hour traces of six-minute ticks, one zone
// each: spot always there at $0.30/h, and spot never there.
func spotTraceDir(t *testing.T) string {
	dir := t.TempDir()
	writeSpotTrace(t, filepath.Join(dir, "zone-a", "up.json"), 360, fill(1, 200), fill(0.3, 200))
	writeSpotTrace(t, filepath.Join(dir, "zone-b", "down.json"), 360, fill(0, 200), nil)
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("not a trace"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A 2h job due at 4h with 12-minute changeovers (two ticks), on-demand at
// $1/h, spot at 0.3 x that.
var smallSpotJob = []string{"--duration", "2h", "--deadline", "4h", "--overhead", "12m", "--jobs", "5", "--on-demand-price", "1"}

func TestReplaySpotJSON(t *testing.T) {
	dir := spotTraceDir(t)
	stdout, stderr, err := runSpotCmd(t, append([]string{"--trace", dir, "-o", "json"}, smallSpotJob...)...)
	if err != nil {
		t.Fatalf("replay spot: %v\n%s", err, stderr)
	}
	type traceLine struct {
		Trace             string  `json:"trace"`
		CostVsOnDemand    float64 `json:"cost_vs_on_demand"`
		DeadlinesMetRatio float64 `json:"deadlines_met_ratio"`
	}
	type line struct {
		Policy            string      `json:"policy"`
		CostVsOnDemand    float64     `json:"cost_vs_on_demand"`
		DeadlinesMetRatio float64     `json:"deadlines_met_ratio"`
		Jobs              int         `json:"jobs"`
		Traces            []traceLine `json:"traces"`
	}
	var got []line
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var o line
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, o)
	}
	// On-demand: 22 ticks (a changeover and the work) at $1/h = $2.20 per
	// job. Where spot is always there, every other policy runs the same
	// ticks on spot: 0.3. Where it never is, greedy waits and then runs on
	// on-demand (1.0); uniform progress goes to on-demand at once, idles
	// once ahead of its line by two changeovers and comes back twice
	// (2.6/2.2); gangway keeps its on-demand instance (1.0).
	traces := func(up, down float64) []traceLine {
		return []traceLine{{"zone-a/up", up, 1}, {"zone-b/down", down, 1}}
	}
	want := []line{
		{Policy: "on-demand", CostVsOnDemand: 1, DeadlinesMetRatio: 1, Jobs: 10, Traces: traces(1, 1)},
		{Policy: "greedy", CostVsOnDemand: (0.66 + 2.2) / 4.4, DeadlinesMetRatio: 1, Jobs: 10, Traces: traces(0.3, 1)},
		{Policy: "uniform-progress", CostVsOnDemand: (0.66 + 2.6) / 4.4, DeadlinesMetRatio: 1, Jobs: 10, Traces: traces(0.3, 2.6/2.2)},
		{Policy: "gangway", CostVsOnDemand: (0.66 + 2.2) / 4.4, DeadlinesMetRatio: 1, Jobs: 10, Traces: traces(0.3, 1)},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("replay spot -o json (-want +got):\n%s", diff)
	}
	if !strings.Contains(stderr, "spot: 2 traces x 5 jobs x 4 policies in ") {
		t.Errorf("stderr %q: want the run's size and time", stderr)
	}
}

func TestReplaySpotText(t *testing.T) {
	dir := spotTraceDir(t)
	stdout, _, err := runSpotCmd(t, append([]string{"--trace", dir}, smallSpotJob...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Spot replay: 2 traces in " + dir + ", 5 jobs each (seed 1)",
		"job: 2h of work, deadline 4h, changeover 12m; on-demand $1.000/h, spot at the trace's price or 0.30 x on-demand",
		"trace        spot  on-demand   greedy      uniform-progress  gangway\n" +
			"zone-a/up    100%  1.000 100%  0.300 100%  0.300 100%        0.300 100%\n" +
			"zone-b/down  0%    1.000 100%  1.000 100%  1.182 100%        1.000 100%\n" +
			"mean               1.000 100%  0.650 100%  0.741 100%        0.650 100%\n",
		"gangway costs 12.3% less than uniform-progress (0.650 vs 0.741 of on-demand) and meets 10 of 10 deadlines (uniform-progress 10)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestReplaySpotCSV(t *testing.T) {
	dir := spotTraceDir(t)
	csvDir := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runSpotCmd(t, append([]string{"--trace", dir, "-o", "csv", "--csv", csvDir,
		"--policies", "greedy,gangway"}, smallSpotJob...)...)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if err != nil {
		t.Fatalf("-o csv printed no CSV: %v\n%s", err, stdout)
	}
	var got [][]string
	for _, r := range rows {
		got = append(got, []string{r[0], r[2], r[4], r[6]}) // trace, policy, cost_vs_on_demand, deadlines_met_ratio
	}
	want := [][]string{
		{"trace", "policy", "cost_vs_on_demand", "deadlines_met_ratio"},
		{"zone-a/up", "greedy", "0.300000", "1.000000"},
		{"zone-a/up", "gangway", "0.300000", "1.000000"},
		{"zone-b/down", "greedy", "1.000000", "1.000000"},
		{"zone-b/down", "gangway", "1.000000", "1.000000"},
		{"mean", "greedy", "0.650000", "1.000000"},
		{"mean", "gangway", "0.650000", "1.000000"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("-o csv (-want +got):\n%s", diff)
	}
	summary, err := os.ReadFile(filepath.Join(csvDir, "spot.csv"))
	if err != nil || string(summary) != stdout {
		t.Errorf("--csv spot.csv (%v) differs from what -o csv printed:\n%s", err, summary)
	}
	runs, err := os.ReadFile(filepath.Join(csvDir, "spot-runs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(runs), "\n"); n != 1+2*2*5 {
		t.Errorf("spot-runs.csv has %d lines, want a header and one per trace, policy and job (21)", n)
	}
	if !strings.Contains(stderr, "spot: wrote 2 files to "+csvDir) {
		t.Errorf("stderr %q: want the files written", stderr)
	}
}

func TestReplaySpotOneFile(t *testing.T) {
	dir := spotTraceDir(t)
	plot := filepath.Join(t.TempDir(), "spot.png")
	stdout, _, err := runSpotCmd(t, append([]string{"--trace", filepath.Join(dir, "zone-a", "up.json"), "--output", "table",
		"--plot", plot}, smallSpotJob...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "\nup     100%  1.000 100%") {
		t.Errorf("a trace given as a file is named by its base name:\n%s", stdout)
	}
	if st, err := os.Stat(plot); err != nil || st.Size() == 0 {
		t.Errorf("--plot %s: %v", plot, err)
	}
}

func TestReplaySpotErrors(t *testing.T) {
	dir := spotTraceDir(t)
	empty := t.TempDir()
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"metadata": {"gap_seconds": 60}, "data": [1, 0, "x"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"unknown output": {args: []string{"-o", "xml"}, wantErr: `--output: want text or json, got "xml" (or csv, table)`},
		"no work":        {args: []string{"--duration", "0s"}, wantErr: "--duration 0s: want a positive duration"},
		"negative overhead": {args: []string{"--overhead", "-1m"},
			wantErr: "--overhead -1m0s: want 0 or more"},
		"deadline too short": {args: []string{"--deadline", "2h"},
			wantErr: "--deadline 2h0m0s: shorter than --duration 2h0m0s plus one --overhead 12m0s, so no policy can meet it"},
		"no jobs":         {args: []string{"--jobs", "0"}, wantErr: "--jobs 0: want 1 or more"},
		"free on-demand":  {args: []string{"--on-demand-price", "0"}, wantErr: "--on-demand-price 0: want a positive price"},
		"free spot":       {args: []string{"--spot-fraction", "0"}, wantErr: "--spot-fraction 0: want a positive share of the on-demand price"},
		"unknown policy":  {args: []string{"--policies", "greedy,optimal"}, wantErr: `--policies: unknown spot policy "optimal" (valid: on-demand, greedy, uniform-progress, gangway)`},
		"policy twice":    {args: []string{"--policies", "gangway,gangway"}, wantErr: `--policies: "gangway" given twice`},
		"no such trace":   {args: []string{"--trace", filepath.Join(empty, "nope.json")}, wantErr: "--trace: stat " + filepath.Join(empty, "nope.json") + ": no such file or directory"},
		"no traces":       {args: []string{"--trace", empty}, wantErr: "--trace: " + empty + ": no .json spot traces in it"},
		"malformed trace": {args: []string{"--trace", bad}, wantErr: "--trace: spot trace bad.json: field data: want int, got JSON string"},
		"malformed trace in a directory": {args: []string{"--trace", filepath.Dir(bad)},
			wantErr: "--trace: bad.json: spot trace bad.json: field data: want int, got JSON string"},
		"trace shorter than the deadline": {args: []string{"--trace", dir, "--deadline", "30h"},
			wantErr: "--trace: spot trace zone-a/up covers 20h0m0s, less than the job's deadline 30h0m0s; shorten --deadline or drop the trace"},
		"plot without a format": {args: []string{"--trace", dir, "--plot", filepath.Join(empty, "chart")},
			wantErr: "--plot: " + filepath.Join(empty, "chart") + ": want a .png, .svg or .pdf file name"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"--trace", dir}, smallSpotJob...)
			_, _, err := runSpotCmd(t, append(args, tc.args...)...)
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestReplaySpotSharedTraces holds Gangway's policy to its promise on the
// shared AWS traces with the command's defaults: every deadline met, for
// less than uniform progress.
func TestReplaySpotSharedTraces(t *testing.T) {
	if !fileExists(tracePath(defaultSpotTraces, true)) {
		t.Skipf("no spot traces at %s", defaultSpotTraces)
	}
	args := []string{"-o", "json"}
	if testing.Short() {
		args = append(args, "--jobs", "50")
	}
	stdout, _, err := runSpotCmd(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		Policy            string  `json:"policy"`
		CostVsOnDemand    float64 `json:"cost_vs_on_demand"`
		DeadlinesMetRatio float64 `json:"deadlines_met_ratio"`
		DeadlinesMet      int     `json:"deadlines_met"`
		Jobs              int     `json:"jobs"`
	}
	got := map[string]line{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var o line
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got[o.Policy] = o
		t.Logf("%-16s cost %.4f of on-demand, deadlines met %d/%d", o.Policy, o.CostVsOnDemand, o.DeadlinesMet, o.Jobs)
	}
	g, up := got["gangway"], got["uniform-progress"]
	if g.DeadlinesMetRatio != 1 {
		t.Errorf("gangway met %d of %d deadlines, want all", g.DeadlinesMet, g.Jobs)
	}
	if g.CostVsOnDemand >= up.CostVsOnDemand {
		t.Errorf("gangway costs %.4f of on-demand, uniform-progress %.4f: want gangway cheaper", g.CostVsOnDemand, up.CostVsOnDemand)
	}
	t.Logf("gangway costs %.1f%% less than uniform-progress", 100*(1-g.CostVsOnDemand/up.CostVsOnDemand))
}
