package activities

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/workflows"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// fakeLedger keeps each segment recorded under its ID with the latest end,
// as the real ledger does, and refuses what the real one refuses.
type fakeLedger struct {
	mu   sync.Mutex
	segs map[string]gangway.UsageSegment
	err  error // returned by every Record while set
}

func (f *fakeLedger) Record(_ context.Context, seg gangway.UsageSegment) (gangway.UsageSegment, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return gangway.UsageSegment{}, false, f.err
	}
	if err := accounting.Validate(seg); err != nil {
		return gangway.UsageSegment{}, false, err
	}
	id := accounting.SegmentID(seg)
	added := seg
	if old, ok := f.segs[id]; ok {
		if !seg.End.After(old.End) {
			return gangway.UsageSegment{}, false, nil
		}
		added.Start = old.End
	}
	if f.segs == nil {
		f.segs = map[string]gangway.UsageSegment{}
	}
	f.segs[id] = seg
	return added, true, nil
}

type fakeMetrics struct {
	mu   sync.Mutex
	segs []gangway.UsageSegment
}

func (f *fakeMetrics) Segment(seg gangway.UsageSegment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.segs = append(f.segs, seg)
}

func usageSegment(job string, attempt int, capacityType gangway.CapacityType) gangway.UsageSegment {
	return gangway.UsageSegment{
		JobID: job, Attempt: attempt, Team: "ml", Project: "llm", Pool: "aws-spot", CapacityType: capacityType,
		GPUs: 8, Start: t0, End: t0.Add(90 * time.Minute), PricePerGPUHour: 1.25,
	}
}

// recordUsage runs RecordUsage by its contract name in Temporal's test
// activity environment.
func recordUsage(t *testing.T, u *Usage, seg gangway.UsageSegment) error {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	u.Register(env)
	_, err := env.ExecuteActivity(workflows.ActivityRecordUsage, workflows.RecordUsageInput{Segment: seg})
	return err
}

func TestRecordUsage(t *testing.T) {
	spot := usageSegment("job-1", 1, "spot")
	onPrem := usageSegment("job-1", 2, gangway.CapacityOnPrem)
	blank := usageSegment("job-1", 2, "")
	tests := map[string]struct {
		record      []gangway.UsageSegment
		ledgerErr   error
		wantErrType string // "" for a retryable error, when wantErr
		wantErr     bool
		wantCounted []gangway.UsageSegment
	}{
		"a new segment is counted": {
			record:      []gangway.UsageSegment{spot},
			wantCounted: []gangway.UsageSegment{spot},
		},
		"a retried or replayed segment is counted once": {
			record:      []gangway.UsageSegment{spot, spot, spot},
			wantCounted: []gangway.UsageSegment{spot},
		},
		"an unnamed capacity type is on-prem": {
			record:      []gangway.UsageSegment{blank, onPrem},
			wantCounted: []gangway.UsageSegment{onPrem},
		},
		"an invalid segment fails for good": {
			record:      []gangway.UsageSegment{usageSegment("", 1, "spot")},
			wantErr:     true,
			wantErrType: ErrTypeInvalidUsage,
		},
		"an unknown capacity type fails for good": {
			record:      []gangway.UsageSegment{usageSegment("job-1", 1, "reserved")},
			wantErr:     true,
			wantErrType: ErrTypeInvalidUsage,
		},
		"a Redis error is retried": {
			record:    []gangway.UsageSegment{spot},
			ledgerErr: errors.New("connection refused"),
			wantErr:   true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := &fakeMetrics{}
			u := &Usage{Ledger: &fakeLedger{err: tc.ledgerErr}, Metrics: m}
			var err error
			for _, s := range tc.record {
				if err = recordUsage(t, u, s); err != nil {
					break
				}
			}
			switch {
			case tc.wantErr && err == nil:
				t.Fatal("RecordUsage succeeded, want an error")
			case !tc.wantErr && err != nil:
				t.Fatalf("RecordUsage: %v", err)
			case tc.wantErr:
				var appErr *temporal.ApplicationError
				if !errors.As(err, &appErr) {
					t.Fatalf("error %v is not an application error", err)
				}
				if tc.wantErrType != "" {
					if appErr.Type() != tc.wantErrType || !appErr.NonRetryable() {
						t.Errorf("error type %q, non-retryable %v; want %q, non-retryable", appErr.Type(), appErr.NonRetryable(), tc.wantErrType)
					}
				} else if appErr.NonRetryable() {
					t.Errorf("error %v is non-retryable, want a retry", err)
				}
			}
			if diff := cmp.Diff(tc.wantCounted, m.segs); diff != "" {
				t.Errorf("segments counted (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRecordUsageOnLedger runs the activity against the real ledger (an
// SQLite file) and the real counters: three recordings of one segment bill
// it once.
func TestRecordUsageOnLedger(t *testing.T) {
	ledger, err := accounting.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ledger.Close() })
	reg := prometheus.NewRegistry()
	u := &Usage{Ledger: ledger, Metrics: metrics.NewUsage(reg)}

	seg := usageSegment("job-1", 1, "spot") // 8 GPUs × 1.5 h × $1.25 = $15
	for range 3 {
		if err := recordUsage(t, u, seg); err != nil {
			t.Fatal(err)
		}
	}
	total, err := ledger.PerJob(context.Background(), "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := (accounting.JobTotal{JobID: "job-1", Segments: 1, GPUSeconds: 43200, Dollars: 15}); total != want {
		t.Errorf("ledger total = %+v, want %+v", total, want)
	}
	if got, err := testutil.GatherAndCount(reg, "gangway_cost_dollars_total"); err != nil || got != 1 {
		t.Errorf("cost series = %d (%v), want 1", got, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if got, want := mf.GetMetric()[0].GetCounter().GetValue(), map[string]float64{
			"gangway_cost_dollars_total": 15, "gangway_gpu_seconds_total": 43200,
		}[mf.GetName()]; got != want {
			t.Errorf("%s = %v, want %v", mf.GetName(), got, want)
		}
	}
}
