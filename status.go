package gangway

import (
	"fmt"
	"slices"
	"time"
)

// Waiting is why the dispatch loop's last cycle left a job pending: the
// placement reason, typed, with the numbers placement gave. The Redis view
// stores it as JSON and the client returns it, so `gangway why` and
// programs read it field by field.
type Waiting struct {
	// Reason is placement's reason code (placement.Reason):
	// InsufficientFreeGPUs, Fragmented, Reserved, WaitingForReservation,
	// QuotaExceeded, WaitingForPreemption, ModelUnavailable, NeverFits or
	// PlanFull.
	Reason string `json:"reason"`
	// Detail says it for people, with the numbers.
	Detail string `json:"detail,omitempty"`
	// Retry: the job may fit later without the fleet changing; false
	// means it never will as the fleet stands (NeverFits,
	// ModelUnavailable).
	Retry bool `json:"retry"`
	// ReservationStart is when the GPUs reserved for the job free up
	// (running jobs' max runtimes), ReservedNodes where; set only while
	// the job holds a reservation.
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

// LogLine is one line of a job's output, as the agent captured it.
type LogLine struct {
	ID      string    `json:"id"` // stream position, set by the view; pass it back as "after"
	Time    time.Time `json:"time"`
	Rank    int       `json:"rank"`
	Attempt int       `json:"attempt"`
	Text    string    `json:"text"`
}

// NodeStatus is a node as the fleet view sees it: inventory, state, last
// heartbeat and what is allocated on it.
type NodeStatus struct {
	Node Node `json:"node"`
	// State is NodeReady, NodeCordoned or NodeLost.
	State         string    `json:"state"`
	LastHeartbeat time.Time `json:"lastHeartbeat"`
	// Allocated maps each held GPU index to the job holding it; free GPUs
	// are absent.
	Allocated    map[int]JobID `json:"allocated,omitempty"`
	UsedCPUMilli int64         `json:"usedCpuMilli"`
	UsedMemMiB   int64         `json:"usedMemMiB"`
}

// Jobs lists the jobs holding the node's GPUs, sorted, each once.
func (s NodeStatus) Jobs() []JobID {
	var out []JobID
	for _, j := range s.Allocated {
		if !slices.Contains(out, j) {
			out = append(out, j)
		}
	}
	slices.Sort(out)
	return out
}

// FreeGPUs returns the indices of the node's GPUs that no job holds, in
// inventory order. Health is not considered; that is placement's call.
func (s NodeStatus) FreeGPUs() []int {
	var free []int
	for _, g := range s.Node.GPUs {
		if _, held := s.Allocated[g.Index]; !held {
			free = append(free, g.Index)
		}
	}
	return free
}
