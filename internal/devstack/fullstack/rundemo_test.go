package fullstack

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/workflows"
)

// scriptedJobs answers each job's Status with its phases in turn, the last
// one from then on.
type scriptedJobs struct {
	phases map[string][]gangway.Phase
	waits  map[string]*gangway.Waiting
}

func (s *scriptedJobs) Submit(_ context.Context, spec gangway.JobSpec, _ client.SubmitOptions) (string, error) {
	return spec.Name, nil
}

func (s *scriptedJobs) Status(_ context.Context, id string) (client.JobStatus, error) {
	ps := s.phases[id]
	p := ps[0]
	if len(ps) > 1 {
		s.phases[id] = ps[1:]
	}
	st := client.JobStatus{Status: workflows.Status{JobID: id, Phase: p}}
	if p == gangway.PhaseQueued {
		st.Waiting = s.waits[id]
	}
	return st, nil
}

func TestDemoRun(t *testing.T) {
	jobs := &scriptedJobs{
		phases: map[string][]gangway.Phase{
			"a-1x1-0": {gangway.PhaseQueued, gangway.PhaseRunning, gangway.PhaseSucceeded},
			"b-2x8-0": {gangway.PhaseQueued, gangway.PhaseQueued, gangway.PhaseFailed},
		},
		waits: map[string]*gangway.Waiting{"b-2x8-0": {Reason: "Fragmented"}},
	}
	var progress []DemoProgress
	var waited []string
	d := Demo{
		Client: jobs,
		Specs: []gangway.JobSpec{{Name: "a-1x1-0", Gang: gangway.Gang{Replicas: 1, GPUsPerReplica: 1}},
			{Name: "b-2x8-0", Gang: gangway.Gang{Replicas: 2, GPUsPerReplica: 8}}},
		GPUUse:     func(context.Context) (int, int, int) { return 1, 8, 0 },
		Poll:       time.Millisecond,
		OnWaiting:  func(id string, w gangway.Waiting) { waited = append(waited, id+" "+w.Reason) },
		OnProgress: func(_ time.Duration, p DemoProgress) { progress = append(progress, p) },
	}
	res, err := d.Run(t.Context())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []DemoProgress{
		{Queued: 2, BusyGPUs: 1, TotalGPUs: 8},
		{Queued: 1, Running: 1, BusyGPUs: 1, TotalGPUs: 8},
		{Succeeded: 1, Failed: 1, BusyGPUs: 1, TotalGPUs: 8},
	}
	if diff := cmp.Diff(want, progress); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	// The gang's reason is reported once, though it waits two rounds.
	if diff := cmp.Diff([]string{"b-2x8-0 Fragmented"}, waited); diff != "" {
		t.Errorf("waiting (-want +got):\n%s", diff)
	}
	if got := res.Statuses["b-2x8-0"].Phase; got != gangway.PhaseFailed {
		t.Errorf("b-2x8-0 ended %s, want Failed", got)
	}
}
