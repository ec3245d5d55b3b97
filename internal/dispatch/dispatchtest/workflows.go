package dispatchtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// Signal is one signal the loop sent to a job's workflow.
type Signal struct {
	Name    string // workflows.SignalPlaced, SignalPreempt or SignalBurst
	JobID   gangway.JobID
	Placed  gangway.Assignment       // for SignalPlaced
	Preempt workflows.PreemptRequest // for SignalPreempt
	Burst   workflows.BurstRequest   // for SignalBurst
}

// Workflows is an in-memory dispatch.Workflows, safe for concurrent use.
// A job's workflow runs from Start to End; signals to a job that is not
// running are jobs.ErrJobGone, the others are recorded in order for
// the caller to act on (TakeSignals), as JobWorkflow would.
type Workflows struct {
	mu      sync.Mutex
	live    map[gangway.JobID]bool
	signals []Signal
}

var _ dispatch.Workflows = (*Workflows)(nil)

// NewWorkflows returns workflows with none running.
func NewWorkflows() *Workflows { return &Workflows{live: map[gangway.JobID]bool{}} }

// Start marks the job's workflow running (submitted).
func (w *Workflows) Start(jobID gangway.JobID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live[jobID] = true
}

// End marks the job's workflow finished.
func (w *Workflows) End(jobID gangway.JobID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.live, jobID)
}

// TakeSignals returns the signals recorded since the last call, oldest
// first, and forgets them.
func (w *Workflows) TakeSignals() []Signal {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.signals
	w.signals = nil
	return s
}

func (w *Workflows) record(s Signal) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.live[s.JobID] {
		return fmt.Errorf("signal %s to %s: %w", s.Name, s.JobID, jobs.ErrJobGone)
	}
	w.signals = append(w.signals, s)
	return nil
}

// SignalPlaced implements dispatch.Workflows.
func (w *Workflows) SignalPlaced(_ context.Context, a gangway.Assignment) error {
	return w.record(Signal{Name: workflows.SignalPlaced, JobID: a.JobID, Placed: a})
}

// SignalPreempt implements dispatch.Workflows.
func (w *Workflows) SignalPreempt(_ context.Context, jobID gangway.JobID, req workflows.PreemptRequest) error {
	return w.record(Signal{Name: workflows.SignalPreempt, JobID: jobID, Preempt: req})
}

// SignalBurst implements dispatch.Workflows.
func (w *Workflows) SignalBurst(_ context.Context, jobID gangway.JobID, req workflows.BurstRequest) error {
	return w.record(Signal{Name: workflows.SignalBurst, JobID: jobID, Burst: req})
}

// Running implements dispatch.Workflows.
func (w *Workflows) Running(_ context.Context, jobID gangway.JobID) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.live[jobID], nil
}

// burstAttempt is the "attempt" field of a recorded burst request.
func burstAttempt(raw []byte) int {
	var r struct {
		Attempt int `json:"attempt"`
	}
	_ = json.Unmarshal(raw, &r)
	return r.Attempt
}
