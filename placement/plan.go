package placement

import (
	"fmt"
	"time"

	"github.com/gangwayhq/gangway"
)

// Plan is Place's answer: jobs to start, running jobs to preempt for them,
// running jobs to move so that fragmented jobs fit, reservations for
// blocked jobs, and why each other job waits.
type Plan struct {
	Assignments  []gangway.Assignment
	Preemptions  []Preemption
	Reservations []Reservation
	// Defrags are the defragmentations this call planned (defrag.go);
	// those planned earlier and still under way show as their jobs'
	// ReasonDefragmenting.
	Defrags  []DefragPlan `json:",omitempty"`
	Unplaced []Unplaced
	// Bursts are waiting jobs to run on rented cloud capacity instead.
	Bursts []Burst `json:",omitempty"`
}

// Preemption is a set of running jobs to stop so Preemptor can start.
type Preemption struct {
	Preemptor gangway.JobID
	Victims   []Victim
}

// Victim is one running job to preempt, with why and what it costs.
type Victim struct {
	JobID   gangway.JobID
	Attempt int
	Reason  string
	// LostGPUSeconds is the work since its last checkpoint.
	LostGPUSeconds float64
}

// Reservation holds GPUs for a blocked job from Start (when running jobs'
// max runtimes free them); smaller jobs may use them only if they end
// before.
type Reservation struct {
	JobID gangway.JobID
	Start time.Time
	Nodes []string
}

// Reason says why a job was not placed. Metric labels use these values.
type Reason string

// Reasons for not placing a job. Retry reports which ones may resolve by
// waiting.
const (
	// ReasonInsufficientGPUs: not enough free GPUs now.
	ReasonInsufficientGPUs Reason = "InsufficientFreeGPUs"
	// ReasonFragmented: enough GPUs are free in total, but not together
	// where the job needs them (one node per replica, one domain).
	ReasonFragmented Reason = "Fragmented"
	// ReasonReserved: free GPUs are held for a blocked higher job, and this
	// job would not end before that reservation starts.
	ReasonReserved Reason = "Reserved"
	// ReasonReservation: the job itself holds a reservation that starts
	// when running jobs end.
	ReasonReservation Reason = "WaitingForReservation"
	// ReasonQuota: the team's quota (and what its cohort can lend) is used.
	ReasonQuota Reason = "QuotaExceeded"
	// ReasonPreempting: running jobs are being preempted for this job.
	ReasonPreempting Reason = "WaitingForPreemption"
	// ReasonDefragmenting: running jobs are being moved elsewhere so that
	// this fragmented job fits; the GPUs it will take are reserved for it.
	ReasonDefragmenting Reason = "WaitingForDefragmentation"
	// ReasonModelUnavailable: no node has an allowed GPU model in an
	// allowed pool.
	ReasonModelUnavailable Reason = "ModelUnavailable"
	// ReasonNeverFits: the whole fleet, free or not, could not hold the job.
	ReasonNeverFits Reason = "NeverFits"
	// ReasonPlanFull: the plan reached Options.MaxAssignments.
	ReasonPlanFull Reason = "PlanFull"
)

// Reasons lists every Reason*, for metrics that create their series up
// front.
var Reasons = []Reason{ReasonInsufficientGPUs, ReasonFragmented, ReasonReserved, ReasonReservation, ReasonQuota,
	ReasonPreempting, ReasonDefragmenting, ReasonModelUnavailable, ReasonNeverFits, ReasonPlanFull}

// Retry reports whether the job may fit later without the fleet changing.
func (r Reason) Retry() bool { return r != ReasonNeverFits && r != ReasonModelUnavailable }

// Unplaced is a job left waiting, with the reason and a sentence for people.
type Unplaced struct {
	JobID  gangway.JobID
	Reason Reason
	Detail string
}

func planFullDetail(n int) string { return fmt.Sprintf("this cycle already starts %d jobs", n) }
