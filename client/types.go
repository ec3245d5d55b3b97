package client

import (
	"fmt"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

// JobStatus is a job's workflow status plus, while it waits, the dispatch
// loop's reason.
type JobStatus struct {
	workflows.Status
	// Waiting is why the last dispatch cycle did not place the job; nil
	// when it is not waiting, no cycle has considered it yet, or the
	// client has no View.
	Waiting *Waiting `json:"waiting,omitempty"`
}

// Waiting is why the dispatch loop left a job pending, typed.
type Waiting struct {
	// Reason is placement's reason code: InsufficientFreeGPUs,
	// Fragmented, Reserved, WaitingForReservation, QuotaExceeded,
	// WaitingForPreemption, ModelUnavailable, NeverFits or PlanFull.
	Reason string `json:"reason"`
	// Detail says it for people, with the numbers.
	Detail string `json:"detail,omitempty"`
	// Retry: the job may fit later without the fleet changing; false
	// means it never will as the fleet stands.
	Retry bool `json:"retry"`
	// ReservationStart is when GPUs reserved for the job free up, and
	// ReservedNodes where; set only while the job holds a reservation.
	ReservationStart time.Time `json:"reservationStart,omitzero"`
	ReservedNodes    []string  `json:"reservedNodes,omitempty"`
}

// String is the reason as one line: "<reason>: <detail>".
func (w Waiting) String() string {
	switch {
	case w.Reason == "":
		return w.Detail
	case w.Detail == "":
		return w.Reason
	}
	return fmt.Sprintf("%s: %s", w.Reason, w.Detail)
}

// LogLine is one line of a job's output.
type LogLine struct {
	ID      string // stream position; pass it to Logs as after
	Time    time.Time
	Rank    int
	Attempt int
	Text    string
}

// Summary is one row of List.
type Summary struct {
	JobID     gangway.JobID `json:"jobId"`
	Team      string        `json:"team"`
	Phase     gangway.Phase `json:"phase"`
	GPUs      int           `json:"gpus"`
	StartedAt time.Time     `json:"submittedAt"`
	ClosedAt  time.Time     `json:"closedAt,omitzero"`
}

// NodeInfo is a node as the fleet view sees it: inventory, state, last
// heartbeat and what is allocated on it.
type NodeInfo struct {
	Node gangway.Node `json:"node"`
	// State is gangway.NodeReady, NodeCordoned or NodeLost.
	State         string    `json:"state"`
	LastHeartbeat time.Time `json:"lastHeartbeat"`
	// Allocated maps each held GPU index to the job holding it; free GPUs
	// are absent.
	Allocated    map[int]gangway.JobID `json:"allocated,omitempty"`
	UsedCPUMilli int64                 `json:"usedCpuMilli"`
	UsedMemMiB   int64                 `json:"usedMemMiB"`
}
