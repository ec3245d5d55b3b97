package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The replay itself and its reports are tested in internal/sim
// (spot_test.go); these tests cover the command: flags, their errors, and
// what it prints where.

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

// spotTraceDir holds one 20-hour trace of six-minute ticks with spot
// always there at $0.30/h.
func spotTraceDir(t *testing.T) string {
	dir := t.TempDir()
	raw := map[string]any{"metadata": map[string]any{"gap_seconds": 360}, "data": fill(1, 200), "prices": fill(0.3, 200)}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "zone-a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "zone-a", "up.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func fill[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// A 2h job due at 4h with 12-minute changeovers (two ticks), on-demand at
// $1/h, spot at 0.3 x that.
var smallSpotJob = []string{"--duration", "2h", "--deadline", "4h", "--overhead", "12m", "--jobs", "5", "--on-demand-price", "1"}

func TestReplaySpotOutputs(t *testing.T) {
	dir := spotTraceDir(t)
	out := t.TempDir()
	csvDir, plot := filepath.Join(out, "csv"), filepath.Join(out, "spot.png")
	stdout, stderr, err := runSpotCmd(t, append([]string{"--trace", dir, "-o", "csv", "--csv", csvDir, "--plot", plot,
		"--policies", "greedy,gangway"}, smallSpotJob...)...)
	if err != nil {
		t.Fatalf("replay spot: %v\n%s", err, stderr)
	}
	summary, err := os.ReadFile(filepath.Join(csvDir, "spot.csv"))
	if err != nil || string(summary) != stdout || !strings.HasPrefix(stdout, "trace,spot_availability,policy,") {
		t.Errorf("-o csv printed %q; --csv spot.csv (%v) should hold the same:\n%s", stdout, err, summary)
	}
	for _, want := range []string{"spot: 1 traces x 5 jobs x 2 policies in ", "spot: wrote 2 files to " + csvDir, "spot: wrote " + plot} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}

	for _, output := range []string{"text", "table"} {
		stdout, _, err = runSpotCmd(t, append([]string{"--trace", dir, "-o", output}, smallSpotJob...)...)
		if err != nil || !strings.HasPrefix(stdout, "Spot replay: 1 traces in "+dir+", 5 jobs each (seed 1)\n") {
			t.Errorf("-o %s: %v\n%s", output, err, stdout)
		}
	}
	stdout, _, err = runSpotCmd(t, append([]string{"--trace", dir, "-o", "json"}, smallSpotJob...)...)
	if err != nil || strings.Count(stdout, "\n") != 4 || !strings.HasPrefix(stdout, `{"policy":"on-demand",`) {
		t.Errorf("-o json: want a line per policy: %v\n%s", err, stdout)
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
		"no work":        {args: []string{"--duration", "0s"}, wantErr: "--duration: want a positive duration, got 0s"},
		"negative overhead": {args: []string{"--overhead", "-1m"},
			wantErr: "--overhead: want 0 or more, got -1m0s"},
		"deadline too short": {args: []string{"--deadline", "2h"},
			wantErr: "--deadline: 2h0m0s is shorter than --duration 2h0m0s plus one --overhead 12m0s, so no policy can meet it"},
		"no jobs":         {args: []string{"--jobs", "0"}, wantErr: "--jobs: want 1 or more, got 0"},
		"free on-demand":  {args: []string{"--on-demand-price", "0"}, wantErr: "--on-demand-price: want a positive price, got 0"},
		"free spot":       {args: []string{"--spot-fraction", "0"}, wantErr: "--spot-fraction: want a positive share of the on-demand price, got 0"},
		"unknown policy":  {args: []string{"--policies", "greedy,optimal"}, wantErr: `--policies: unknown spot policy "optimal" (valid: on-demand, greedy, uniform-progress, gangway)`},
		"policy twice":    {args: []string{"--policies", "gangway,gangway"}, wantErr: `--policies: "gangway" given twice`},
		"no such trace":   {args: []string{"--trace", filepath.Join(empty, "nope.json")}, wantErr: "--trace: stat " + filepath.Join(empty, "nope.json") + ": no such file or directory"},
		"malformed trace": {args: []string{"--trace", bad}, wantErr: "--trace: spot trace bad.json: field data: want int, got JSON string"},
		"trace shorter than the deadline": {args: []string{"--trace", dir, "--deadline", "30h"},
			wantErr: "--trace: every trace is shorter than the deadline (spot trace zone-a/up covers 20h0m0s, less than the job's deadline 30h0m0s); shorten --deadline"},
		"negative instances": {args: []string{"--instances", "-1"}, wantErr: "--instances: want 1 or more, or 0 for each trace's pool size, got -1"},
		"negative zone move": {args: []string{"--zone-move", "-1m"}, wantErr: "--zone-move: want 0 or more, got -1m0s"},
		"unknown zone policy": {args: []string{"--trace", dir, "--zone-policies", "teleport"},
			wantErr: `--zone-policies: unknown multi-zone spot policy "teleport" (valid: uniform-progress-rr, gangway-multizone)`},
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

// TestReplaySpotZonesAndShortTraces: a directory of zones gets the zone
// table (none with --zone-policies none); a trace shorter than the
// deadline is skipped with a warning on stderr naming it, and the rest run.
func TestReplaySpotZonesAndShortTraces(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, data []int) {
		b, err := json.Marshal(map[string]any{"metadata": map[string]any{"gap_seconds": 360}, "data": data})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("set/us-east-1a_v100_1.json", append(fill(1, 100), fill(0, 100)...))
	write("set/us-east-1b_v100_1.json", append(fill(0, 100), fill(1, 100)...))
	write("set/us-east-1c_v100_1.json", fill(1, 10))
	stdout, stderr, err := runSpotCmd(t, append([]string{"--trace", dir}, smallSpotJob...)...)
	if err != nil {
		t.Fatalf("replay spot: %v\n%s", err, stderr)
	}
	for _, want := range []string{"Zone sets (the traces of one directory)", "gangway-multizone", "skipped, shorter than the deadline: set/us-east-1c_v100_1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if want := `msg="spot replay: trace skipped, shorter than the deadline" trace=set/us-east-1c_v100_1`; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q lacks %q", stderr, want)
	}
	stdout, _, err = runSpotCmd(t, append([]string{"--trace", dir, "--zone-policies", "none"}, smallSpotJob...)...)
	if err != nil || strings.Contains(stdout, "Zone sets") {
		t.Errorf("--zone-policies none: %v\n%s", err, stdout)
	}
}
