package sim_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway/internal/sim"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

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

func allPolicies(t *testing.T) []spotpolicy.Policy {
	t.Helper()
	var ps []spotpolicy.Policy
	for _, name := range spotpolicy.Names() {
		p, err := spotpolicy.ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// runSmallSpot replays a 2h job due at 4h with 12-minute changeovers (two
// ticks), on-demand at $1/h, spot at 0.3 x that, five jobs per trace of
// root.
func runSmallSpot(t *testing.T, root string, policies ...spotpolicy.Policy) *sim.SpotResult {
	t.Helper()
	traces, err := sim.LoadSpotTraces(root)
	if err != nil {
		t.Fatal(err)
	}
	if policies == nil {
		policies = allPolicies(t)
	}
	res, err := sim.RunSpot(sim.SpotConfig{Source: root, Traces: traces, Policies: policies, Jobs: 5, Seed: 1,
		Job:           spotpolicy.Job{Work: 2 * time.Hour, Deadline: 4 * time.Hour, Overhead: 12 * time.Minute},
		OnDemandPrice: 1, SpotFraction: sim.DefaultSpotFraction})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestSpotJSON(t *testing.T) {
	res := runSmallSpot(t, spotTraceDir(t))
	var buf bytes.Buffer
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
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
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
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
		t.Errorf("WriteJSON (-want +got):\n%s", diff)
	}
}

func TestSpotText(t *testing.T) {
	dir := spotTraceDir(t)
	var buf bytes.Buffer
	if err := runSmallSpot(t, dir).WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Spot replay: 2 traces in " + dir + ", 5 jobs each (seed 1)",
		"job: 2h of work on each trace's pool instances at once, deadline 4h, changeover 12m\n" +
			"on-demand at the instance type's list price ($1.000/h where it is not known), spot at the trace's price or 0.30 x on-demand",
		"trace        instance  n  spot  on-demand   greedy      uniform-progress  gangway\n" +
			"zone-a/up    ?* $1.00  1  100%  1.000 100%  0.300 100%  0.300 100%        0.300 100%\n" +
			"zone-b/down  ?* $1.00  1  0%    1.000 100%  1.000 100%  1.182 100%        1.000 100%\n" +
			"mean                            1.000 100%  0.650 100%  0.741 100%        0.650 100%\n",
		"gangway costs 12.3% less than uniform-progress (0.650 vs 0.741 of on-demand) and meets 10 of 10 deadlines (uniform-progress 10)",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("WriteText lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestSpotCSV(t *testing.T) {
	res := runSmallSpot(t, spotTraceDir(t), spotpolicy.Greedy{}, spotpolicy.DefaultGangway())
	var buf bytes.Buffer
	if err := res.WriteSummaryCSV(&buf); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(buf.String())).ReadAll()
	if err != nil {
		t.Fatalf("WriteSummaryCSV wrote no CSV: %v\n%s", err, buf.String())
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
		t.Errorf("WriteSummaryCSV (-want +got):\n%s", diff)
	}

	csvDir := filepath.Join(t.TempDir(), "out")
	files, err := res.WriteCSV(csvDir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{filepath.Join(csvDir, "spot.csv"), filepath.Join(csvDir, "spot-runs.csv")}, files); diff != "" {
		t.Errorf("WriteCSV files (-want +got):\n%s", diff)
	}
	summary, err := os.ReadFile(filepath.Join(csvDir, "spot.csv"))
	if err != nil || string(summary) != buf.String() {
		t.Errorf("spot.csv (%v) differs from WriteSummaryCSV:\n%s", err, summary)
	}
	runs, err := os.ReadFile(filepath.Join(csvDir, "spot-runs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(runs), "\n"); n != 1+2*2*5 {
		t.Errorf("spot-runs.csv has %d lines, want a header and one per trace, policy and job (21)", n)
	}
}

func TestSpotOneFile(t *testing.T) {
	dir := spotTraceDir(t)
	res := runSmallSpot(t, filepath.Join(dir, "zone-a", "up.json"))
	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "\nup     ?* $1.00  1  100%  1.000 100%") {
		t.Errorf("a trace given as a file is named by its base name:\n%s", buf.String())
	}
	plot := filepath.Join(t.TempDir(), "spot.png")
	if err := res.WritePlot(plot); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(plot); err != nil || st.Size() == 0 {
		t.Errorf("WritePlot(%s): %v", plot, err)
	}
	if err := res.WritePlot(filepath.Join(dir, "chart")); err == nil || err.Error() != filepath.Join(dir, "chart")+": want a .png, .svg or .pdf file name" {
		t.Errorf("WritePlot without an extension: %v", err)
	}
}

func TestLoadSpotTracesErrors(t *testing.T) {
	empty := t.TempDir()
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"metadata": {"gap_seconds": 60}, "data": [1, 0, "x"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		root    string
		wantErr string
	}{
		"no such trace":                  {root: filepath.Join(empty, "nope.json"), wantErr: "stat " + filepath.Join(empty, "nope.json") + ": no such file or directory"},
		"no traces":                      {root: empty, wantErr: empty + ": no .json spot traces in it"},
		"malformed trace":                {root: bad, wantErr: "spot trace bad.json: field data: want int, got JSON string"},
		"malformed trace in a directory": {root: filepath.Dir(bad), wantErr: "bad.json: spot trace bad.json: field data: want int, got JSON string"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := sim.LoadSpotTraces(tc.root)
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestRunSpotErrors(t *testing.T) {
	dir := spotTraceDir(t)
	traces, err := sim.LoadSpotTraces(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sim.RunSpot(sim.SpotConfig{Traces: traces, Policies: allPolicies(t), Jobs: 1, OnDemandPrice: 1, SpotFraction: 0.3,
		Job: spotpolicy.Job{Work: 2 * time.Hour, Deadline: 30 * time.Hour}, Log: slog.New(slog.DiscardHandler)})
	var short *spotpolicy.ShortTraceError
	if !errors.As(err, &short) || err.Error() != "spot trace zone-a/up covers 20h0m0s, less than the job's deadline 30h0m0s" {
		t.Errorf("RunSpot on traces all shorter than the deadline: %v", err)
	}
	if _, err := sim.RunSpot(sim.SpotConfig{Traces: traces, Jobs: 0}); err == nil || err.Error() != "spot replay: 0 jobs per trace: want 1 or more" {
		t.Errorf("RunSpot without jobs: %v", err)
	}
	if _, err := sim.RunSpot(sim.SpotConfig{Jobs: 1}); err == nil || err.Error() != "spot replay: no traces" {
		t.Errorf("RunSpot without traces: %v", err)
	}
}

// TestSpotSharedTraces holds Gangway's policies to their promise on the
// shared AWS traces with the replay's defaults: every deadline met, for
// less than uniform progress; across each set's zones, at most 0.80 of
// uniform progress in one zone.
func TestSpotSharedTraces(t *testing.T) {
	const dir = "../../../shared/traces/spot"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no spot traces at %s", dir)
	}
	traces, err := sim.LoadSpotTraces(dir)
	if err != nil {
		t.Fatal(err)
	}
	jobs := sim.DefaultSpotJobs
	if testing.Short() {
		jobs = 50
	}
	var zps []spotpolicy.ZonePolicy
	for _, name := range spotpolicy.ZoneNames() {
		p, _ := spotpolicy.ZoneByName(name)
		zps = append(zps, p)
	}
	res, err := sim.RunSpot(sim.SpotConfig{Source: dir, Traces: traces, Policies: allPolicies(t), ZonePolicies: zps, ZoneMove: sim.DefaultZoneMove,
		Jobs: jobs, Seed: 1, Job: sim.DefaultSpotJob, OnDemandPrice: sim.DefaultOnDemandPrice, SpotFraction: sim.DefaultSpotFraction})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*sim.SpotStats{}
	for i := range res.Mean {
		s := &res.Mean[i]
		got[s.Policy] = s
		t.Logf("%-16s cost %.4f of on-demand, deadlines met %d/%d", s.Policy, s.CostVsOnDemand(), s.Met, s.Jobs)
	}
	g, up := got["gangway"], got["uniform-progress"]
	if g.MetRatio() != 1 {
		t.Errorf("gangway met %d of %d deadlines, want all", g.Met, g.Jobs)
	}
	if g.CostVsOnDemand() >= up.CostVsOnDemand() {
		t.Errorf("gangway costs %.4f of on-demand, uniform-progress %.4f: want gangway cheaper", g.CostVsOnDemand(), up.CostVsOnDemand())
	}
	t.Logf("gangway costs %.1f%% less than uniform-progress", 100*(1-g.CostVsOnDemand()/up.CostVsOnDemand()))

	// Per zone set: the multi-zone policy meets every deadline at no more
	// than 0.80 of uniform progress in one zone (docs/benchmarks.md).
	if len(res.ZoneSets) != 2 {
		t.Fatalf("%d zone sets, want the availability and the preemption set", len(res.ZoneSets))
	}
	upIdx := slices.Index(res.Policies, spotpolicy.NameUniformProgress)
	for _, z := range res.ZoneSets {
		for _, m := range z.Multi {
			ratio := m.CostVsOnDemand() / z.Single[upIdx].CostVsOnDemand()
			t.Logf("%s: %s costs %.3f of on-demand, %.3f of uniform-progress in one zone, deadlines met %d/%d", z.Name, m.Policy,
				m.CostVsOnDemand(), ratio, m.Met, m.Jobs)
			if m.Policy == spotpolicy.NameMultiZone && (m.MetRatio() != 1 || ratio > 0.80) {
				t.Errorf("%s: gangway-multizone met %d/%d deadlines at %.3f of single-zone uniform progress; want all, at 0.80 or less",
					z.Name, m.Met, m.Jobs, ratio)
			}
		}
	}
}

// TestRunSpotSkipsShortTraces: a trace shorter than the deadline is left
// out with a warning naming it, and the rest of the directory runs.
func TestRunSpotSkipsShortTraces(t *testing.T) {
	dir := spotTraceDir(t)
	writeSpotTrace(t, filepath.Join(dir, "zone-c", "short.json"), 360, fill(1, 30), nil) // 3 hours
	traces, err := sim.LoadSpotTraces(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	res, err := sim.RunSpot(sim.SpotConfig{Traces: traces, Policies: allPolicies(t), Jobs: 2, OnDemandPrice: 1, SpotFraction: 0.3,
		Job: spotpolicy.Job{Work: 2 * time.Hour, Deadline: 4 * time.Hour, Overhead: 12 * time.Minute},
		Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tr := range res.Traces {
		names = append(names, tr.Name)
	}
	if diff := cmp.Diff([]string{"zone-a/up", "zone-b/down"}, names); diff != "" {
		t.Errorf("traces replayed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"zone-c/short"}, res.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if want := "trace skipped, shorter than the deadline\" trace=zone-c/short covers=3h0m0s deadline=4h0m0s"; !strings.Contains(logged.String(), want) {
		t.Errorf("log %q lacks %q", logged.String(), want)
	}
	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "skipped, shorter than the deadline: zone-c/short\n") {
		t.Errorf("the report does not name the skipped trace:\n%s", buf.String())
	}
}

// TestRunSpotPoolsAndPrices: a trace under <N>-node/ replays N-instance
// jobs, which run on spot only while N are available and pay per
// instance; on-demand is priced at the trace's instance type (metadata,
// then the price table, then the configured fallback).
func TestRunSpotPoolsAndPrices(t *testing.T) {
	dir := t.TempDir()
	// 4-node pool: 3 of 4 available for the first 10 hours, then all 4.
	pool := append(fill(3, 100), fill(4, 100)...)
	writeSpotTrace(t, filepath.Join(dir, "4-node", "us-east-1a_v100_1.json"), 360, pool, nil)
	// Metadata names its own on-demand price; spot at its own prices.
	raw := map[string]any{"metadata": map[string]any{"gap_seconds": 360, "price_info": map[string]any{"on_demand_price": 2.0}},
		"data": fill(1, 200), "prices": fill(0.5, 200)}
	b, _ := json.Marshal(raw)
	if err := os.MkdirAll(filepath.Join(dir, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other", "us-west-2a_k80_8.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	writeSpotTrace(t, filepath.Join(dir, "other", "zone_unknown.json"), 360, fill(1, 200), nil)
	traces, err := sim.LoadSpotTraces(dir)
	if err != nil {
		t.Fatal(err)
	}
	job := spotpolicy.Job{Work: 2 * time.Hour, Deadline: 4 * time.Hour, Overhead: 12 * time.Minute}
	res, err := sim.RunSpot(sim.SpotConfig{Traces: traces, Policies: []spotpolicy.Policy{spotpolicy.OnDemandOnly{}, spotpolicy.Greedy{}},
		Jobs: 20, Seed: 1, Job: job, OnDemandPrice: 1, SpotFraction: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name, Type            string
		Instances             int
		OnDemand, Avail       float64
		Known                 bool
		OnDemandJob, GreedyVs float64
	}
	var got []row
	for _, tr := range res.Traces {
		got = append(got, row{tr.Name, tr.InstanceType, tr.Instances, tr.OnDemandPrice, tr.Availability, tr.PriceKnown,
			tr.Stats[0].Cost / float64(tr.Stats[0].Jobs), tr.Stats[1].CostVsOnDemand()})
	}
	want := []row{
		// 4 × p3.2xlarge at $3.06 for 2.2 h; availability counts ticks with 4.
		{"4-node/us-east-1a_v100_1", "p3.2xlarge", 4, 3.06, 0.5, true, 4 * 3.06 * 2.2, -1},
		// The metadata's $2/h, not p2.8xlarge's $7.20; spot at the trace's $0.50.
		{"other/us-west-2a_k80_8", "p2.8xlarge", 1, 2, 1, true, 2 * 2.2, 0.25},
		{"other/zone_unknown", "", 1, 1, 1, false, 2.2, 0.3},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9), cmpopts.IgnoreFields(row{}, "GreedyVs")); diff != "" {
		t.Errorf("per trace (-want +got):\n%s", diff)
	}
	for i := 1; i < 3; i++ {
		if d := got[i].GreedyVs - want[i].GreedyVs; d < -1e-9 || d > 1e-9 {
			t.Errorf("%s: greedy costs %.4f of on-demand, want %.4f", got[i].Name, got[i].GreedyVs, want[i].GreedyVs)
		}
	}
	// The 4-instance jobs: none may count 3 available as spot for all 4.
	for _, run := range res.Traces[0].Runs[1] {
		startTick := int(run.Start / (6 * time.Minute))
		if run.SpotTime > 0 && startTick+int((run.SpotTime+run.OnDemandTime)/(6*time.Minute)) <= 100 && run.OnDemandTime == 0 {
			t.Errorf("a 4-instance job ran on spot while only 3 were available: %+v", run)
		}
	}
}

// TestRunSpotZoneSets: the traces of one directory form a zone set; the
// multi-zone policies move to where spot is, and are compared with the
// same jobs in each zone alone.
func TestRunSpotZoneSets(t *testing.T) {
	dir := t.TempDir()
	// Two zones taking turns: each up 5 hours, down 5 hours.
	a := slices.Concat(fill(1, 50), fill(0, 50), fill(1, 50), fill(0, 50))
	b := slices.Concat(fill(0, 50), fill(1, 50), fill(0, 50), fill(1, 50))
	writeSpotTrace(t, filepath.Join(dir, "set", "us-east-1a_v100_1.json"), 360, a, nil)
	writeSpotTrace(t, filepath.Join(dir, "set", "us-east-1b_v100_1.json"), 360, b, nil)
	writeSpotTrace(t, filepath.Join(dir, "alone", "us-east-1c_v100_1.json"), 360, fill(1, 200), nil)
	traces, err := sim.LoadSpotTraces(dir)
	if err != nil {
		t.Fatal(err)
	}
	var zps []spotpolicy.ZonePolicy
	for _, name := range spotpolicy.ZoneNames() {
		p, _ := spotpolicy.ZoneByName(name)
		zps = append(zps, p)
	}
	res, err := sim.RunSpot(sim.SpotConfig{Traces: traces, Policies: allPolicies(t), ZonePolicies: zps, ZoneMove: 6 * time.Minute,
		Jobs: 20, Seed: 1, Job: spotpolicy.Job{Work: 6 * time.Hour, Deadline: 9 * time.Hour, Overhead: 12 * time.Minute},
		OnDemandPrice: 1, SpotFraction: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ZoneSets) != 1 || res.ZoneSets[0].Name != "set" || res.ZoneSets[0].AnyAvailability != 1 {
		t.Fatalf("zone sets: %+v, want the one of set/, spot in some zone always", res.ZoneSets)
	}
	z := res.ZoneSets[0]
	up := z.Single[slices.Index(res.Policies, spotpolicy.NameUniformProgress)]
	for _, m := range z.Multi {
		if m.Met != m.Jobs {
			t.Errorf("%s met %d of %d deadlines", m.Policy, m.Met, m.Jobs)
		}
		if m.Moves == 0 || m.OnDemand != 0 {
			t.Errorf("%s: %d moves, %v on on-demand; want it to follow spot from zone to zone", m.Policy, m.Moves, m.OnDemand)
		}
		if m.CostVsOnDemand() >= up.CostVsOnDemand() {
			t.Errorf("%s costs %.3f of on-demand, uniform progress in one zone %.3f", m.Policy, m.CostVsOnDemand(), up.CostVsOnDemand())
		}
	}
	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "Zone sets (the traces of one directory)") || !strings.Contains(buf.String(), "\nset ") {
		t.Errorf("the report lacks the zone table:\n%s", buf.String())
	}
	buf.Reset()
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if want := len(res.Policies) + len(res.Policies) + len(res.ZonePolicies); len(lines) != want {
		t.Fatalf("WriteJSON wrote %d lines, want %d: a line per policy, then per zone set and policy", len(lines), want)
	}
	var last sim.SpotZoneJSON
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.ZoneSet != "set" || last.Policy != spotpolicy.NameMultiZone ||
		last.OneZone || last.DeadlinesMetRatio != 1 || last.CostVsUniformProgress >= 1 || last.Moves == 0 {
		t.Errorf("last JSON line %s (%v): want gangway-multizone on set, cheaper than uniform progress in one zone", lines[len(lines)-1], err)
	}
	files, err := res.WriteCSV(t.TempDir())
	if err != nil || len(files) != 3 || filepath.Base(files[2]) != "spot-zones.csv" {
		t.Errorf("WriteCSV with zone sets: %v, %v; want spot-zones.csv too", files, err)
	}
}

// TestZoneSetsByDevice: a directory of several devices (as the traces of
// aws-10-26-2022: K80 and V100, 1 and 8 per instance) makes one zone set
// per device; a set whose zones do not share a tick length is left out
// with its reason, its zones still replayed alone.
func TestZoneSetsByDevice(t *testing.T) {
	dir := t.TempDir()
	up := slices.Concat(fill(1, 100), fill(0, 100))
	down := slices.Concat(fill(0, 100), fill(1, 100))
	writeSpotTrace(t, filepath.Join(dir, "d", "us-west-2a_k80_1.json"), 360, up, nil)
	writeSpotTrace(t, filepath.Join(dir, "d", "us-west-2b_k80_1.json"), 360, down, nil)
	writeSpotTrace(t, filepath.Join(dir, "d", "us-west-2a_v100_1.json"), 360, up, nil)
	writeSpotTrace(t, filepath.Join(dir, "d", "us-west-2b_v100_1.json"), 180, slices.Concat(down, down), nil)
	traces, err := sim.LoadSpotTraces(dir)
	if err != nil {
		t.Fatal(err)
	}
	zp, _ := spotpolicy.ZoneByName(spotpolicy.NameMultiZone)
	res, err := sim.RunSpot(sim.SpotConfig{Traces: traces, Policies: allPolicies(t), ZonePolicies: []spotpolicy.ZonePolicy{zp},
		Jobs: 3, Seed: 1, Job: spotpolicy.Job{Work: 2 * time.Hour, Deadline: 4 * time.Hour, Overhead: 12 * time.Minute},
		OnDemandPrice: 1, SpotFraction: 0.3, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Traces) != 4 || len(res.ZoneSets) != 1 || res.ZoneSets[0].Name != "d (k80_1, 1)" || res.ZoneSets[0].OnDemandPrice != 0.9 {
		t.Errorf("traces %d, zone sets %+v: want 4 traces and the K80 set at p2.xlarge's $0.90", len(res.Traces), res.ZoneSets)
	}
	if len(res.SkippedZoneSets) != 1 || !strings.Contains(res.SkippedZoneSets[0], "d (v100_1, 1): spot traces d/us-west-2a_v100_1 and d/us-west-2b_v100_1: ticks of 6m0s and 3m0s") {
		t.Errorf("skipped zone sets %q", res.SkippedZoneSets)
	}
}
