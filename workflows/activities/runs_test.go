package activities

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

type fakeRunMetrics []string

func (f *fakeRunMetrics) RunEnded(cause, team, pool string, ct gangway.CapacityType, lost float64, stop time.Duration) {
	*f = append(*f, fmt.Sprintf("ended %s %s %s %s lost %v stop %v", cause, team, pool, ct, lost, stop))
}

func (f *fakeRunMetrics) Recovered(cause string, d time.Duration) {
	*f = append(*f, fmt.Sprintf("recovered %s %v", cause, d))
}

func TestRecordRun(t *testing.T) {
	m := &fakeRunMetrics{}
	r := &Runs{Metrics: m}
	t0 := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	ctx := context.Background()
	for _, in := range []workflows.RecordRunInput{
		{Team: "nlp", Ended: &workflows.AttemptRecord{Ended: workflows.CauseNotice, Pool: "spot", CapacityType: "spot",
			StopRequestedAt: t0, EndedAt: t0.Add(3 * time.Second), LostGPUSeconds: 8}},
		{Team: "nlp", Ended: &workflows.AttemptRecord{Ended: workflows.CauseCompleted, Pool: "onprem", CapacityType: "on-prem", EndedAt: t0}},
		{Team: "nlp", RecoveredCause: workflows.CauseNotice, RecoveredAfter: 40 * time.Second},
	} {
		if err := r.RecordRun(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	want := fakeRunMetrics{
		"ended notice nlp spot spot lost 8 stop 3s",
		"ended completed nlp onprem on-prem lost 0 stop 0s",
		"recovered notice 40s",
	}
	if d := cmp.Diff(want, *m); d != "" {
		t.Errorf("metrics (-want +got):\n%s", d)
	}
}
