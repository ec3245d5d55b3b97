package client

import (
	"encoding/json"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// JobStatus is a job's workflow status plus, while it waits, the dispatch
// loop's reason.
//
// As JSON (gangway status --output json, and any program that encodes it)
// its durations are Go duration strings, as in the job spec: "waitTime":
// "1m30s", "assignment": {"maxRuntime": "2h", ...}; never nanoseconds.
type JobStatus struct {
	workflows.Status
	// Waiting is why the last dispatch cycle did not place the job — the
	// reason, the jobs it waits for, its start-time estimate and its cloud
	// option; nil when it is not waiting, no cycle has considered it yet,
	// or the client has no View.
	Waiting *gangway.Waiting `json:"waiting,omitempty"`
	// AsOf is the time the totals are live at (Live); zero when they are
	// the workflow's own, which count a wait when it ends and a run when
	// it ends.
	AsOf time.Time `json:"asOf,omitzero"`
	// Unavailable says, one line each, what the status lacks because a
	// service did not answer ("redis is unreachable: …; why the job waits
	// is not shown").
	Unavailable []string `json:"unavailable,omitempty"`
}

// Live is the status with what the current phase has accrued by now added
// to the totals: for a waiting job the wait so far, for a running one the
// run so far, its GPU-seconds and its cost at each member's price (in the
// totals and in the open run's record). A finished job's totals are final
// and stay as they are. On a status already live (AsOf set: the user API's
// server made it so) it adds only what accrued since AsOf.
func (s JobStatus) Live(now time.Time) JobStatus {
	st := &s.Status
	if st.Phase.Terminal() || len(st.Phases) == 0 || now.Before(s.AsOf) {
		return s
	}
	since := func(t time.Time) time.Duration {
		if t.Before(s.AsOf) {
			t = s.AsOf
		}
		return max(now.Sub(t), 0)
	}
	switch st.Phase {
	case gangway.PhaseSubmitted, gangway.PhaseQueued, gangway.PhaseRequeued, gangway.PhaseProvisioning:
		st.WaitTime += since(st.Phases[len(st.Phases)-1].At)
	}
	if n := len(st.Attempts); n > 0 && st.Attempts[n-1].EndedAt.IsZero() && st.Assignment != nil {
		open := st.Attempts[n-1]
		d := since(open.StartedAt)
		cost := 0.0
		for _, m := range st.Assignment.Members {
			seg := gangway.UsageSegment{GPUs: len(m.GPUs), Start: now.Add(-d), End: now, PricePerGPUHour: m.PricePerGPUHour}
			cost += seg.Dollars()
		}
		st.RunTime += d
		st.GPUSeconds += d.Seconds() * float64(st.Assignment.GPUCount())
		st.Dollars += cost
		open.Dollars += cost
		st.Attempts = append(st.Attempts[:n-1:n-1], open)
	}
	s.AsOf = now
	return s
}

// The JSON shapes of JobStatus. workflows.Status is the workflow's own
// payload and keeps time.Duration (nanoseconds) for the histories already
// recorded; here the duration fields are shadowed, at a shallower depth,
// by gangway.Duration ones.
type (
	statusFields     workflows.Status
	assignmentFields gangway.Assignment
	assignmentJSON   struct {
		assignmentFields
		MaxRuntime gangway.Duration `json:"maxRuntime,omitzero"`
		Runtime    gangway.Duration `json:"runtime,omitzero"`
	}
	jobStatusJSON struct {
		statusFields
		WaitTime   gangway.Duration `json:"waitTime"`
		RunTime    gangway.Duration `json:"runTime"`
		Assignment *assignmentJSON  `json:"assignment,omitempty"`
		Waiting    *gangway.Waiting `json:"waiting,omitempty"`
		AsOf       time.Time        `json:"asOf,omitzero"`
		// Unavailable is JobStatus's.
		Unavailable []string `json:"unavailable,omitempty"`
	}
)

// MarshalJSON writes durations as Go duration strings.
func (s JobStatus) MarshalJSON() ([]byte, error) {
	out := jobStatusJSON{statusFields: statusFields(s.Status), WaitTime: gangway.Duration{Duration: s.WaitTime},
		RunTime: gangway.Duration{Duration: s.RunTime}, Waiting: s.Waiting, AsOf: s.AsOf, Unavailable: s.Unavailable}
	if a := s.Assignment; a != nil {
		out.Assignment = &assignmentJSON{assignmentFields: assignmentFields(*a),
			MaxRuntime: gangway.Duration{Duration: a.MaxRuntime}, Runtime: gangway.Duration{Duration: a.Runtime}}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *JobStatus) UnmarshalJSON(b []byte) error {
	var in jobStatusJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*s = JobStatus{Status: workflows.Status(in.statusFields), Waiting: in.Waiting, AsOf: in.AsOf, Unavailable: in.Unavailable}
	s.WaitTime, s.RunTime = in.WaitTime.Duration, in.RunTime.Duration
	if in.Assignment != nil {
		a := gangway.Assignment(in.Assignment.assignmentFields)
		a.MaxRuntime, a.Runtime = in.Assignment.MaxRuntime.Duration, in.Assignment.Runtime.Duration
		s.Assignment = &a
	}
	return nil
}

// Summary is one row of List: the job workflows' own summary.
type Summary = jobs.Summary

// Submitted is the user API's answer to a submit: the job's ID and team,
// and what the server accepted without checking (SubmitOptions.Warn).
type Submitted struct {
	JobID    gangway.JobID `json:"jobId"`
	Team     string        `json:"team"`
	Warnings []string      `json:"warnings,omitempty"`
}
