package client

import (
	"encoding/json"

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
	// Waiting is why the last dispatch cycle did not place the job; nil
	// when it is not waiting, no cycle has considered it yet, or the
	// client has no View.
	Waiting *gangway.Waiting `json:"waiting,omitempty"`
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
	}
)

// MarshalJSON writes durations as Go duration strings.
func (s JobStatus) MarshalJSON() ([]byte, error) {
	out := jobStatusJSON{statusFields: statusFields(s.Status), WaitTime: gangway.Duration{Duration: s.WaitTime},
		RunTime: gangway.Duration{Duration: s.RunTime}, Waiting: s.Waiting}
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
	*s = JobStatus{Status: workflows.Status(in.statusFields), Waiting: in.Waiting}
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
