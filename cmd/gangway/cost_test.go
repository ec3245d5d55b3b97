package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
)

func TestCostRejectedBeforeConnecting(t *testing.T) {
	bogus := []string{"--redis-url", "redis://127.0.0.1:1"}
	tests := map[string]struct {
		args         []string
		wantErrParts []string
	}{
		"bad --by":     {args: []string{"--by", "region"}, wantErrParts: []string{"--by"}},
		"bad --since":  {args: []string{"--since", "last week"}, wantErrParts: []string{"--since"}},
		"bad --until":  {args: []string{"--until", "soon"}, wantErrParts: []string{"--until"}},
		"bad --output": {args: []string{"--output", "yaml"}, wantErrParts: []string{"--output", `"yaml"`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := runGangway(t, append(append([]string{"cost"}, tc.args...), bogus...)...)
			if err == nil {
				t.Fatalf("gangway cost %s succeeded:\n%s", strings.Join(tc.args, " "), out)
			}
			for _, part := range tc.wantErrParts {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not name %q", err, part)
				}
			}
			if strings.Contains(err.Error(), "redis at") {
				t.Errorf("error %q comes from connecting, not from checking the flags", err)
			}
		})
	}
}

// TestCost fills an SQLite ledger, commits runs in flight to a real Redis
// view, serves both through the user API, and checks what gangway cost
// prints from them in each format.
func TestCost(t *testing.T) {
	r := devstacktest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	const prefix = "{test-cost}"
	ledgerDSN := "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")

	t0 := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	h := time.Hour
	segment := func(job string, attempt int, team, project, pool string, capacityType gangway.CapacityType, gpus int, start, end time.Duration, price float64) gangway.UsageSegment {
		return gangway.UsageSegment{JobID: job, Attempt: attempt, Team: team, Project: project, Pool: pool,
			CapacityType: capacityType, GPUs: gpus, Start: t0.Add(start), End: t0.Add(end), PricePerGPUHour: price}
	}
	ledger, err := accounting.Open(t.Context(), ledgerDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ledger.Close() })
	for _, s := range []gangway.UsageSegment{
		segment("train-1", 1, "ml", "llm", "onprem", "on-prem", 2, 0, 90*time.Minute, 4),  // 3 GPU-h, $12
		segment("train-1", 2, "ml", "llm", "aws-spot", "spot", 4, 2*h, 4*h, 1.25),         // 8 GPU-h, $10
		segment("train-2", 1, "ml", "", "aws-od", "on-demand", 1, h, 2*h, 3),              // 1 GPU-h, $3
		segment("rl-1", 1, "research", "rl", "onprem", "on-prem", 1, 0, 4*h, 0.5),         // 4 GPU-h, $2
		segment("old-1", 1, "research", "rl", "onprem", "on-prem", 1, -48*h, -47*h, 0.5),  // before the window
		segment("late-1", 1, "vision", "det", "gcp-spot", "spot", 8, 5*24*h, 5*24*h+h, 1), // straddles its end: 4 GPU-h inside, $4
	} {
		if _, _, err := ledger.Record(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	// In flight: serve-1 from two hours before the window's end, on 2
	// on-prem GPUs at $0.5 (4 GPU-h, $2, inside the window); train-2's
	// attempt 1, whose segment is recorded, still holds its allocation and
	// counts once.
	running := []gangway.Assignment{
		{JobID: "serve-1", Attempt: 1, Team: "vision", Project: "det", At: t0.Add(5*24*h - 90*time.Minute),
			Members: []gangway.Member{{NodeID: "n1", Pool: "onprem", GPUs: []int{0, 1}, PricePerGPUHour: 0.5}}},
		{JobID: "train-2", Attempt: 1, Team: "ml", At: t0.Add(h),
			Members: []gangway.Member{{NodeID: "n1", Pool: "aws-od", GPUs: []int{2}, CapacityType: "on-demand", PricePerGPUHour: 3}}},
	}
	commitRunning(t, capacity.New(rdb, capacity.Options{Prefix: prefix}), running)
	url, token := startAPI(t, nil, capacity.New(rdb, capacity.Options{Prefix: prefix}), ledger)
	api := []string{"--api", url, "--token", token}
	window := append([]string{"--since", "2025-06-01", "--until", "2025-06-07T12:30:00Z"}, api...)

	tests := map[string]struct {
		args []string
		want string
	}{
		"table by team": {
			args: []string{"--by", "team"},
			want: `Usage by team from 2025-06-01 00:00:00 UTC to 2025-06-07 12:30:00 UTC

TEAM      GPU-H ON-PREM  GPU-H SPOT  GPU-H ON-DEMAND  $ ON-PREM  $ SPOT  $ ON-DEMAND  $ TOTAL  SPOT SAVED  IN FLIGHT
ml                  3.0         8.0              1.0      12.00   10.00         3.00    25.00           -          0
vision              4.0         4.0              0.0       2.00    4.00         0.00     6.00           -          1
research            4.0         0.0              0.0       2.00    0.00         0.00     2.00        0.00          0
TOTAL              11.0        12.0              1.0      16.00   14.00         3.00    33.00           -          1

SPOT SAVED is - where the on-demand price of a pool with spot usage is unknown.

IN FLIGHT counts runs still going (1 in all): their GPU-hours and dollars are the cost so far.
`,
		},
		"table by project": {
			args: []string{"--by", "project", "-o", "text"},
			want: `Usage by project from 2025-06-01 00:00:00 UTC to 2025-06-07 12:30:00 UTC

PROJECT  GPU-H ON-PREM  GPU-H SPOT  GPU-H ON-DEMAND  $ ON-PREM  $ SPOT  $ ON-DEMAND  $ TOTAL  SPOT SAVED  IN FLIGHT
llm                3.0         8.0              0.0      12.00   10.00         0.00    22.00           -          0
det                4.0         4.0              0.0       2.00    4.00         0.00     6.00           -          1
(none)             0.0         0.0              1.0       0.00    0.00         3.00     3.00        0.00          0
rl                 4.0         0.0              0.0       2.00    0.00         0.00     2.00        0.00          0
TOTAL             11.0        12.0              1.0      16.00   14.00         3.00    33.00           -          1

SPOT SAVED is - where the on-demand price of a pool with spot usage is unknown.

IN FLIGHT counts runs still going (1 in all): their GPU-hours and dollars are the cost so far.
`,
		},
		"csv by pool": {
			args: []string{"--by", "pool", "--output", "csv"},
			want: `pool,gpu_hours_on_prem,gpu_hours_spot,gpu_hours_on_demand,dollars_on_prem,dollars_spot,dollars_on_demand,dollars_total,spot_saved_dollars,runs_in_flight
onprem,11,0,0,16,0,0,16,0,1
aws-spot,0,8,0,0,10,0,10,,0
gcp-spot,0,4,0,0,4,0,4,,0
aws-od,0,0,1,0,0,3,3,0,0
`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := runGangway(t, append(append([]string{"cost"}, window...), tc.args...)...)
			if err != nil {
				t.Fatalf("gangway cost: %v\n%s", err, out)
			}
			if diff := cmp.Diff(tc.want, out); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("json by team", func(t *testing.T) {
		out, err := runGangway(t, append(append([]string{"cost"}, window...), "--output", "json")...)
		if err != nil {
			t.Fatalf("gangway cost: %v\n%s", err, out)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		row := func(group string, segments, inFlight int, hours, dollars [3]float64, total float64, saved any) map[string]any {
			return map[string]any{
				"group": group, "segments": float64(segments), "inFlight": float64(inFlight),
				"gpuHours":         map[string]any{"onPrem": hours[0], "spot": hours[1], "onDemand": hours[2]},
				"dollars":          map[string]any{"onPrem": dollars[0], "spot": dollars[1], "onDemand": dollars[2]},
				"totalDollars":     total,
				"spotSavedDollars": saved,
			}
		}
		want := map[string]any{
			"by":    "team",
			"since": "2025-06-01T00:00:00Z",
			"until": "2025-06-07T12:30:00Z",
			"rows": []any{
				row("ml", 3, 0, [3]float64{3, 8, 1}, [3]float64{12, 10, 3}, 25, nil),
				row("vision", 2, 1, [3]float64{4, 4, 0}, [3]float64{2, 4, 0}, 6, nil),
				row("research", 1, 0, [3]float64{4, 0, 0}, [3]float64{2, 0, 0}, 2, 0.0),
			},
			"total": row("", 6, 1, [3]float64{11, 12, 1}, [3]float64{16, 14, 3}, 33, nil),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("JSON (-want +got):\n%s", diff)
		}
	})

	t.Run("an empty window", func(t *testing.T) {
		out, err := runGangway(t, append([]string{"cost", "--since", "2020-01-01", "--until", "2020-02-01", "-o", "csv"}, api...)...)
		if err != nil {
			t.Fatalf("gangway cost: %v\n%s", err, out)
		}
		if want := "team,gpu_hours_on_prem,gpu_hours_spot,gpu_hours_on_demand,dollars_on_prem,dollars_spot,dollars_on_demand,dollars_total,spot_saved_dollars,runs_in_flight\n"; out != want {
			t.Errorf("output %q, want only the header %q", out, want)
		}
	})

	// A server with a cloud publishes its offers; the client's config has
	// no cloud, as beside `gangway dev`, and spot savings are still known
	// where a spot pool has an on-demand pool of the same instance type.
	t.Run("spot saved from the published offers", func(t *testing.T) {
		view := capacity.New(rdb, capacity.Options{Prefix: prefix})
		offers := []gangway.Offer{
			{Provider: "aws", Pool: "aws-spot", Zone: "z1", InstanceType: "p4", GPUModel: "A100", GPUsPerInstance: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 10},
			{Provider: "aws", Pool: "aws-od", Zone: "z1", InstanceType: "p4", GPUModel: "A100", GPUsPerInstance: 8, CapacityType: gangway.CapacityOnDemand, PricePerHour: 24},
		}
		if err := view.PublishOffers(t.Context(), offers, time.Minute); err != nil {
			t.Fatal(err)
		}
		out, err := runGangway(t, append(append([]string{"cost"}, window...), "--by", "pool", "-o", "csv")...)
		if err != nil {
			t.Fatalf("gangway cost: %v\n%s", err, out)
		}
		// aws-spot: 8 GPU-h at $3 on demand = $24, less the $10 paid.
		if want := "aws-spot,0,8,0,0,10,0,10,14,0\n"; !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	})

	t.Run("without redis", func(t *testing.T) {
		dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		t.Cleanup(func() { _ = dead.Close() })
		url, token := startAPI(t, nil, capacity.New(dead, capacity.Options{Prefix: prefix}), ledger)
		out, err := runGangway(t, "cost", "--api", url, "--token", token,
			"--since", "2025-06-01", "--until", "2025-06-07T12:30:00Z", "-o", "csv")
		if err != nil {
			t.Fatalf("gangway cost: %v\n%s", err, out)
		}
		want := `warning: runs in flight are not counted: allocations: dial tcp 127.0.0.1:1: connect: connection refused
warning: cloud pools' on-demand prices are not known: cloud offers: dial tcp 127.0.0.1:1: connect: connection refused
team,gpu_hours_on_prem,gpu_hours_spot,gpu_hours_on_demand,dollars_on_prem,dollars_spot,dollars_on_demand,dollars_total,spot_saved_dollars,runs_in_flight
ml,3,8,1,12,10,3,25,,0
vision,0,4,0,0,4,0,4,,0
research,4,0,0,2,0,0,2,0,0
`
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
	})
}

// commitRunning commits runs to the view as the dispatch loop would: the
// node they use registered, each job queued, then placed.
func commitRunning(t *testing.T, v *capacity.View, running []gangway.Assignment) {
	t.Helper()
	ctx := t.Context()
	node := gangway.Node{ID: "n1", Pool: "onprem", CPUMilli: 64000, MemMiB: 1 << 20}
	for i := range 8 {
		node.GPUs = append(node.GPUs, gangway.GPU{Index: i, UUID: fmt.Sprintf("GPU-n1-%d", i), Model: "H100", Healthy: true})
	}
	if err := v.RegisterNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	if ok, err := v.AcquireLease(ctx, "test", time.Minute); err != nil || !ok {
		t.Fatalf("lease: %v, %v", ok, err)
	}
	for _, a := range running {
		if _, err := v.Enqueue(ctx, gangway.QueueEntry{JobID: a.JobID, Team: a.Team, Project: a.Project, Attempt: a.Attempt,
			Replicas: 1, GPUsPerReplica: a.GPUCount()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Commit(ctx, "test", running); err != nil {
		t.Fatal(err)
	}
}
