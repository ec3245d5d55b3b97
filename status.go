package gangway

import (
	"fmt"
	"maps"
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
	// QuotaExceeded, WaitingForPreemption, WaitingForDefragmentation,
	// ModelUnavailable, NeverFits or PlanFull.
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
	// Moving lists the running jobs being moved (checkpointed and
	// restarted elsewhere) to make room for the job, MoveLostGPUSeconds
	// what the moves are expected to cost (work since their newest
	// checkpoints plus restarts); ReservedNodes then names where the job
	// will run. Set only while the job waits for defragmentation.
	Moving             []JobID `json:"moving,omitempty"`
	MoveLostGPUSeconds float64 `json:"moveLostGPUSeconds,omitempty"`
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
	// Allocated maps each GPU held whole to the job holding it; Shared
	// maps each shared GPU to the jobs holding shares of it and their
	// milli-GPU (summing to at most MilliPerGPU). A GPU is in at most one
	// of the two; free GPUs are in neither.
	Allocated    map[int]JobID         `json:"allocated,omitempty"`
	Shared       map[int]map[JobID]int `json:"shared,omitempty"`
	UsedCPUMilli int64                 `json:"usedCpuMilli"`
	UsedMemMiB   int64                 `json:"usedMemMiB"`
}

// SharedMilli is how much of GPU index its shares hold, in milli-GPU.
func (s NodeStatus) SharedMilli(index int) int {
	total := 0
	for _, m := range s.Shared[index] {
		total += m
	}
	return total
}

// Jobs returns the jobs holding any of the node's GPUs, whole or in
// shares, sorted.
func (s NodeStatus) Jobs() []JobID {
	set := map[JobID]bool{}
	for _, j := range s.Allocated {
		set[j] = true
	}
	for _, held := range s.Shared {
		for j := range held {
			set[j] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// HeldGPUs is how many of the node's GPUs are held, whole or in shares.
func (s NodeStatus) HeldGPUs() int { return len(s.Allocated) + len(s.Shared) }

// FreeGPUs returns the indices of the node's GPUs that no job holds, whole
// or in shares, in inventory order. Health is not considered; that is
// placement's call.
func (s NodeStatus) FreeGPUs() []int {
	var free []int
	for _, g := range s.Node.GPUs {
		_, held := s.Allocated[g.Index]
		if _, shared := s.Shared[g.Index]; !held && !shared {
			free = append(free, g.Index)
		}
	}
	return free
}
