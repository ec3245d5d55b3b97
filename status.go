package gangway

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
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
	// ETA is when the job is expected to start; nil when there is no
	// estimate (not made yet, estimates are off, or it never fits).
	ETA *ETA `json:"eta,omitempty"`
	// WaitsFor are the jobs whose end frees what this one needs (GPUs on
	// the nodes it is expected to start on, or its team's quota), as the
	// estimate sees it: not every job that happens to be running.
	WaitsFor []JobID `json:"waitsFor,omitempty"`
	// Cloud is the cheapest cloud capacity the job could start on now,
	// priced to completion; nil when no cloud offer fits it.
	Cloud *CloudOption `json:"cloud,omitempty"`
	// Moving lists the running jobs being moved (checkpointed and
	// restarted elsewhere) to make room for the job, MoveLostGPUSeconds
	// what the moves are expected to cost (work since their newest
	// checkpoints plus restarts); ReservedNodes then names where the job
	// will run. Set only while the job waits for defragmentation.
	Moving             []JobID `json:"moving,omitempty"`
	MoveLostGPUSeconds float64 `json:"moveLostGPUSeconds,omitempty"`
}

// ETA is when a waiting job is expected to start: a forward simulation
// of the fleet through the placement engine (placement/forecast), scaled
// by how earlier estimates compared with the starts jobs got.
type ETA struct {
	// P50 and P90: of jobs given such an estimate, half start by P50 and
	// nine in ten by P90.
	P50 time.Time `json:"p50"`
	P90 time.Time `json:"p90"`
	// At is when the estimate was made.
	At time.Time `json:"at"`
	// Beyond: the job starts later than the forecast looked ahead; P50
	// and P90 are lower bounds.
	Beyond bool `json:"beyond,omitempty"`
	// Cloud: it is expected to start on rented cloud capacity.
	Cloud bool `json:"cloud,omitempty"`
}

// NoneInSight: the forecast found nothing that would let the job start,
// however far it looked: no job running or queued ahead is expected to
// end and free what it needs (a lost node, say, holds the rest). P50 and
// P90 then say nothing.
func (e ETA) NoneInSight() bool { return e.Beyond && !e.P50.After(e.At) }

// String is the estimate for people, relative to now: "in 42m (P90 in
// 1h10m)".
func (e ETA) String(now time.Time) string {
	in := func(t time.Time) string {
		d := t.Sub(now)
		if d <= 0 {
			return "now"
		}
		return "in " + shortDuration(roundAbout(d))
	}
	p50, p90 := in(e.P50), in(e.P90)
	switch {
	case e.NoneInSight():
		return "none in sight: nothing running or queued is expected to free what it needs"
	case e.Beyond:
		return fmt.Sprintf("not %s or sooner (beyond what the estimate looks ahead)", p50)
	}
	where := ""
	if e.Cloud {
		where = " on cloud capacity"
	}
	if p90 == p50 {
		return p50 + where
	}
	return fmt.Sprintf("%s%s (P90 %s)", p50, where, p90)
}

// shortDuration is d without its zero tail: "42m", "1h10m", "2h", "45s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// roundAbout rounds a wait to what a person reads: seconds under a
// minute, ten seconds under ten minutes, minutes under a few hours, then
// hours.
func roundAbout(d time.Duration) time.Duration {
	switch {
	case d < time.Minute:
		return d.Round(time.Second)
	case d < 10*time.Minute:
		return d.Round(10 * time.Second)
	case d < 3*time.Hour:
		return d.Round(time.Minute)
	}
	return d.Round(time.Hour)
}

// CloudOption is the cheapest cloud capacity a waiting job could rent now,
// priced to completion (expected interruptions included).
type CloudOption struct {
	Pool         string       `json:"pool"`
	CapacityType CapacityType `json:"capacityType"`
	InstanceType string       `json:"instanceType"`
	Instances    int          `json:"instances"`
	// PricePerGPUHour is what each GPU the job holds costs there.
	PricePerGPUHour  float64  `json:"pricePerGPUHour"`
	ExpectedCost     float64  `json:"expectedCost"`
	ExpectedDuration Duration `json:"expectedDuration"`
	// Bursting: the dispatch loop is sending the job there now.
	// BurstEnabled: the job's spec lets it burst; when false, this is what
	// enabling burst would offer.
	Bursting     bool `json:"bursting,omitempty"`
	BurstEnabled bool `json:"burstEnabled"`
}

// CloudOptionOf is offer o for a job of gpusPerReplica GPUs per replica.
func CloudOptionOf(o BurstOffer, gpusPerReplica int) CloudOption {
	return CloudOption{Pool: o.Pool, CapacityType: o.CapacityType, InstanceType: o.InstanceType, Instances: o.Count,
		PricePerGPUHour: o.PricePerGPUHourFor(gpusPerReplica), ExpectedCost: o.ExpectedCost,
		ExpectedDuration: Duration{o.ExpectedDuration}}
}

// String is the option for people: "start now on spot in fake-a100-spot,
// about $4.10 expected over 2h (1×a2-highgpu-1g at $2.93/GPU-h)" — over
// how long it is expected to run there (the runtime the estimator
// predicts for it, else its estimatedRuntime, else its maxRuntime, with
// the work interruptions redo).
func (c CloudOption) String() string {
	verb := "start now"
	switch {
	case c.Bursting:
		verb = "starting"
	case !c.BurstEnabled:
		verb = "with burst enabled, it could start now"
	}
	over := ""
	if d := c.ExpectedDuration.Duration; d > 0 {
		over = " over " + shortDuration(roundAbout(d))
	}
	return fmt.Sprintf("%s on %s in %s, about %s expected%s (%d×%s at %s/GPU-h)", verb, c.CapacityType, c.Pool,
		FormatDollars(c.ExpectedCost), over, c.Instances, c.InstanceType, FormatDollars(c.PricePerGPUHour))
}

// FormatDollars formats an amount of money as Gangway shows it: cents, or
// four decimals under a cent (a one-GPU job of seconds costs fractions of
// one).
func FormatDollars(v float64) string {
	if v != 0 && math.Abs(v) < 0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// FormatTime formats a time as Gangway shows it to people in reasons and
// pages: UTC, to the second ("2026-12-08 23:43:18 UTC").
func FormatTime(t time.Time) string { return t.UTC().Format(time.DateTime) + " UTC" }

// Plural is one when n is 1, else many.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// CloudOnly reports whether the job can never fit on-prem as the fleet
// stands but may burst: the cloud is where it can start.
func (w Waiting) CloudOnly() bool {
	return w.Reason != "" && !w.Retry && w.Cloud != nil && w.Cloud.BurstEnabled
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
	State string `json:"state"`
	// LastHeartbeat is when the node's agent last heartbeat, and
	// HeartbeatAge how long before the read that was, both on the Redis
	// server's clock: the one clock liveness is judged by, never the
	// agent's or the reader's. With no heartbeat on record (never heard
	// from, or made silent since: its task was lost, its agent shut down)
	// LastHeartbeat is zero and HeartbeatAge the time since 1970.
	LastHeartbeat time.Time `json:"lastHeartbeat"`
	HeartbeatAge  Duration  `json:"heartbeatAge"`
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
