package dispatchtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/placement"
)

// Capacity is an in-memory dispatch.Capacity, safe for concurrent use.
// Snapshot.Now is its clock's time.
type Capacity struct {
	clock interface{ Now() time.Time }

	mu        sync.Mutex
	nodes     []*nodeRec // sorted by ID
	byID      map[string]*nodeRec
	queue     map[gangway.JobID]gangway.QueueEntry
	allocs    map[gangway.JobID]alloc
	reasons   map[gangway.JobID]gangway.Waiting
	bursting  map[gangway.JobID][]byte
	holder    string
	leaseTill time.Time
	// saved is each job's newest recorded checkpoint (RecordCheckpoint);
	// every, when set, has each checkpointing allocation save every so
	// often from its start (CheckpointEvery).
	saved map[gangway.JobID]savedAt
	every time.Duration

	// Sorted copies, rebuilt only after a change: a replay snapshots
	// thousands of times.
	queueSorted  []gangway.QueueEntry
	allocsSorted []gangway.Assignment
}

type nodeRec struct {
	node  gangway.Node
	state string
	beat  time.Time
	gpus  map[int]*gpuUse // by GPU index
	cpu   int64           // CPU held by allocations
	mem   int64
	// status is the node as Snapshot reports it; nil after a change.
	status *gangway.NodeStatus
}

// gpuUse is who holds one GPU: one job whole, or shares adding up to at
// most placement.Whole.
type gpuUse struct {
	whole  gangway.JobID
	shares map[gangway.JobID]int
	milli  int // of the shares
}

func (g *gpuUse) free() bool { return g.whole == "" && g.milli == 0 }

type savedAt struct {
	attempt int
	at      time.Time
}

// alloc is a committed assignment and the CPU and memory each member holds
// (from its queue entry, as the commit script records them).
type alloc struct {
	a        gangway.Assignment
	cpu, mem int64
}

var _ dispatch.Capacity = (*Capacity)(nil)

// NewCapacity returns an empty view whose snapshots read clock.
func NewCapacity(clock interface{ Now() time.Time }) *Capacity {
	return &Capacity{clock: clock, byID: map[string]*nodeRec{}, queue: map[gangway.JobID]gangway.QueueEntry{},
		allocs: map[gangway.JobID]alloc{}, reasons: map[gangway.JobID]gangway.Waiting{}, bursting: map[gangway.JobID][]byte{}}
}

// RegisterNode adds the node, ready and heartbeating now, or replaces its
// inventory.
func (c *Capacity) RegisterNode(n gangway.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.byID[n.ID]
	if r == nil {
		r = &nodeRec{gpus: map[int]*gpuUse{}}
		c.byID[n.ID] = r
		i, _ := slices.BinarySearchFunc(c.nodes, n.ID, func(x *nodeRec, id string) int { return strings.Compare(x.node.ID, id) })
		c.nodes = slices.Insert(c.nodes, i, r)
	}
	r.node, r.state, r.beat, r.status = n, gangway.NodeReady, c.clock.Now(), nil
	for _, g := range n.GPUs {
		if r.gpus[g.Index] == nil {
			r.gpus[g.Index] = &gpuUse{}
		}
	}
}

// Heartbeat records a heartbeat from every node now.
func (c *Capacity) Heartbeat() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for _, r := range c.nodes {
		r.beat = now
	}
}

// SetNodeState sets a node's state (gangway.NodeReady, NodeCordoned, ...).
func (c *Capacity) SetNodeState(nodeID, state string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.byID[nodeID]
	if r == nil {
		return fmt.Errorf("set state of %s: %w", nodeID, capacity.ErrNotFound)
	}
	r.state, r.status = state, nil
	return nil
}

// Enqueue queues the entry as the enqueue script does: it is ignored (false)
// when the job holds GPUs of the same or a later attempt, has a later
// attempt queued, or left the queue to burst at this or a later attempt.
func (c *Capacity) Enqueue(e gangway.QueueEntry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if raw, ok := c.bursting[e.JobID]; ok {
		b := burstAttempt(raw)
		if b > e.Attempt || (b == e.Attempt && len(e.Nodes) == 0) {
			return false
		}
	}
	if a, ok := c.allocs[e.JobID]; ok && a.a.Attempt >= e.Attempt {
		return false
	}
	if q, ok := c.queue[e.JobID]; ok && q.Attempt > e.Attempt {
		return false
	}
	c.queue[e.JobID] = e
	delete(c.bursting, e.JobID)
	c.queueSorted = nil
	return true
}

// Dequeue removes a queued job (a cancelled one) and its burst record.
func (c *Capacity) Dequeue(jobID gangway.JobID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.queue[jobID]; ok {
		delete(c.queue, jobID)
		c.queueSorted = nil
	}
	delete(c.bursting, jobID)
}

// Reasons returns the reasons the last cycle wrote, by job.
func (c *Capacity) Reasons() map[gangway.JobID]gangway.Waiting {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.reasons)
}

// NodeUse is what is held on one node: milli-GPU per GPU in inventory order
// (placement.Whole for a GPU held whole), CPU and memory.
func (c *Capacity) NodeUse(nodeID string) (gpuMilli []int, cpuMilli, memMiB int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.byID[nodeID]
	if r == nil {
		return nil, 0, 0
	}
	gpuMilli = make([]int, len(r.node.GPUs))
	for i, g := range r.node.GPUs {
		if u := r.gpus[g.Index]; u.whole != "" {
			gpuMilli[i] = placement.Whole
		} else {
			gpuMilli[i] = u.milli
		}
	}
	return gpuMilli, r.cpu, r.mem
}

// Snapshot implements dispatch.Capacity.
func (c *Capacity) Snapshot(context.Context) (capacity.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// An in-memory view is never lost: it is always rebuilt.
	s := capacity.Snapshot{Now: c.clock.Now(), Nodes: make([]gangway.NodeStatus, len(c.nodes)), Rebuilt: true}
	for i, r := range c.nodes {
		if r.status == nil {
			st := gangway.NodeStatus{Node: r.node, State: r.state, Allocated: map[int]gangway.JobID{},
				UsedCPUMilli: r.cpu, UsedMemMiB: r.mem}
			for idx, g := range r.gpus {
				switch {
				case g.whole != "":
					st.Allocated[idx] = g.whole
				case g.milli > 0:
					if st.Shared == nil {
						st.Shared = map[int]map[gangway.JobID]int{}
					}
					st.Shared[idx] = maps.Clone(g.shares)
				}
			}
			r.status = &st
		}
		// The maps are never changed once built (a change builds a new
		// status), so snapshots may share them.
		s.Nodes[i] = *r.status
		s.Nodes[i].LastHeartbeat = r.beat
	}
	if c.queueSorted == nil {
		c.queueSorted = slices.Collect(maps.Values(c.queue))
		capacity.SortQueue(c.queueSorted)
	}
	s.Queue = slices.Clone(c.queueSorted)
	s.Allocations = slices.Clone(c.sortedAllocs())
	if c.every > 0 || len(c.saved) > 0 {
		for i := range s.Allocations {
			a := &s.Allocations[i]
			if r, ok := c.saved[a.JobID]; ok && r.attempt == a.Attempt && r.at.After(a.At) {
				a.LastCheckpoint = r.at
			}
			if c.every > 0 && a.Checkpointable && s.Now.After(a.At) {
				if at := a.At.Add(s.Now.Sub(a.At) / c.every * c.every); at.After(a.LastCheckpoint) && at.After(a.At) {
					a.LastCheckpoint = at
				}
			}
		}
	}
	return s, nil
}

// RecordCheckpoint records that attempt of job saved a checkpoint at at,
// as the view's does: the newest of the newest attempt is kept, and a
// snapshot reports it as that allocation's LastCheckpoint.
func (c *Capacity) RecordCheckpoint(_ context.Context, jobID gangway.JobID, attempt int, at time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.saved[jobID]; ok && (r.attempt > attempt || r.attempt == attempt && !at.After(r.at)) {
		return nil
	}
	if c.saved == nil {
		c.saved = map[gangway.JobID]savedAt{}
	}
	c.saved[jobID] = savedAt{attempt, at}
	return nil
}

// CheckpointEvery models agents whose jobs save a checkpoint every d from
// the start of each attempt: a snapshot reports each checkpointing
// allocation's newest such save as its LastCheckpoint (0: none). A
// replay uses it instead of a RecordCheckpoint per save.
func (c *Capacity) CheckpointEvery(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.every = d
}

// byJobID orders allocations by job ID for binary search.
func byJobID(a gangway.Assignment, id gangway.JobID) int { return strings.Compare(a.JobID, id) }

// sortedAllocs returns the allocations by job ID. Commit and Release keep
// the list sorted as they change it, so a cycle does not sort thousands of
// allocations again.
func (c *Capacity) sortedAllocs() []gangway.Assignment {
	if c.allocsSorted == nil {
		c.allocsSorted = make([]gangway.Assignment, 0, len(c.allocs))
		for _, a := range c.allocs {
			c.allocsSorted = append(c.allocsSorted, a.a)
		}
		slices.SortFunc(c.allocsSorted, func(a, b gangway.Assignment) int { return byJobID(a, b.JobID) })
	}
	return c.allocsSorted
}

// Commit implements dispatch.Capacity with the commit script's checks, in
// its order: the lease; then for each assignment the job appears once, is
// queued at exactly its attempt and holds no GPUs; every member's node is
// registered and ready; every GPU exists, is free (for a share: has room
// for it) and is not claimed twice by the plan. A failed check writes
// nothing and wraps capacity.ErrStale (capacity.ErrNotLeader for the lease).
func (c *Capacity) Commit(_ context.Context, holder string, plan []gangway.Assignment) error {
	if len(plan) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.leads(holder) {
		return fmt.Errorf("commit: lease held by %q: %w", c.holder, capacity.ErrNotLeader)
	}
	seen := map[gangway.JobID]bool{}
	type gpuKey struct {
		node string
		gpu  int
	}
	claimed := map[gpuKey]int{} // milli claimed by the plan; Whole for whole GPUs
	stale := func(job, format string, args ...any) error {
		return fmt.Errorf("commit: job %s: %s: %w", job, fmt.Sprintf(format, args...), capacity.ErrStale)
	}
	for _, a := range plan {
		if len(a.Members) == 0 {
			return fmt.Errorf("commit: invalid plan: job %s: no members", a.JobID)
		}
		if seen[a.JobID] {
			return stale(a.JobID, "job appears twice in the plan")
		}
		seen[a.JobID] = true
		e, ok := c.queue[a.JobID]
		if !ok {
			return stale(a.JobID, "job is not queued")
		}
		if e.Attempt != a.Attempt {
			return stale(a.JobID, "queued attempt is %d, plan has %d", e.Attempt, a.Attempt)
		}
		if held, ok := c.allocs[a.JobID]; ok {
			return stale(a.JobID, "job already holds GPUs for attempt %d", held.a.Attempt)
		}
		for _, m := range a.Members {
			r := c.byID[m.NodeID]
			if r == nil {
				return stale(a.JobID, "node %s is not registered", m.NodeID)
			}
			if r.state != gangway.NodeReady {
				return stale(a.JobID, "node %s is %s", m.NodeID, r.state)
			}
			need := m.Milli
			if need <= 0 || need >= placement.Whole {
				need = placement.Whole
			}
			for _, gi := range m.GPUs {
				g := r.gpus[gi]
				if g == nil {
					return stale(a.JobID, "node %s has no gpu %d", m.NodeID, gi)
				}
				k := gpuKey{m.NodeID, gi}
				used := claimed[k]
				if g.whole != "" {
					used = placement.Whole
				} else {
					used += g.milli
				}
				if used+need > placement.Whole {
					if claimed[k] > 0 {
						return stale(a.JobID, "gpu %s/%d is also claimed in this plan", m.NodeID, gi)
					}
					return stale(a.JobID, "gpu %s/%d is held", m.NodeID, gi)
				}
				claimed[k] += need
			}
		}
	}
	for _, a := range plan {
		e := c.queue[a.JobID]
		delete(c.queue, a.JobID)
		delete(c.reasons, a.JobID)
		for _, m := range a.Members {
			r := c.byID[m.NodeID]
			for _, gi := range m.GPUs {
				g := r.gpus[gi]
				if m.Share() {
					if g.shares == nil {
						g.shares = map[gangway.JobID]int{}
					}
					g.shares[a.JobID] += m.Milli
					g.milli += m.Milli
				} else {
					g.whole = a.JobID
				}
			}
			r.cpu += e.CPUMilli
			r.mem += e.MemMiB
			r.status = nil
		}
		c.sortedAllocs() // built before the new allocation is recorded, so it is inserted once
		c.allocs[a.JobID] = alloc{a: a, cpu: e.CPUMilli, mem: e.MemMiB}
		i, _ := slices.BinarySearchFunc(c.allocsSorted, a.JobID, byJobID)
		c.allocsSorted = slices.Insert(c.allocsSorted, i, a)
	}
	c.queueSorted = nil
	return nil
}

// Release implements dispatch.Capacity: it frees the job's GPUs unless its
// allocation belongs to a later attempt, and returns how many it freed.
func (c *Capacity) Release(_ context.Context, jobID gangway.JobID, attempt int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	al, ok := c.allocs[jobID]
	if !ok || al.a.Attempt > attempt {
		return 0, nil
	}
	freed := 0
	for _, m := range al.a.Members {
		r := c.byID[m.NodeID]
		if r == nil {
			continue
		}
		for _, gi := range m.GPUs {
			g := r.gpus[gi]
			switch {
			case g == nil:
			case g.whole == jobID:
				g.whole = ""
				freed++
			case g.shares[jobID] > 0:
				g.milli -= g.shares[jobID]
				delete(g.shares, jobID)
				freed++
			}
		}
		r.cpu -= al.cpu
		r.mem -= al.mem
		r.status = nil
	}
	delete(c.allocs, jobID)
	delete(c.saved, jobID)
	if i, found := slices.BinarySearchFunc(c.allocsSorted, jobID, byJobID); found {
		c.allocsSorted = slices.Delete(c.allocsSorted, i, i+1)
	}
	return freed, nil
}

// Allocations implements dispatch.Capacity.
func (c *Capacity) Allocations(context.Context) ([]gangway.Assignment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sortedAllocs()), nil
}

// AcquireLease implements dispatch.Capacity: the lease is free, expired or
// already the holder's.
func (c *Capacity) AcquireLease(_ context.Context, holder string, ttl time.Duration) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if c.holder != "" && c.holder != holder && now.Before(c.leaseTill) {
		return false, nil
	}
	c.holder, c.leaseTill = holder, now.Add(ttl)
	return true, nil
}

// ReleaseLease implements dispatch.Capacity.
func (c *Capacity) ReleaseLease(_ context.Context, holder string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holder == holder {
		c.holder = ""
	}
	return nil
}

// LeaseHolder is who holds the lease now: "" when it is free or ran out.
func (c *Capacity) LeaseHolder() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.clock.Now().Before(c.leaseTill) {
		return ""
	}
	return c.holder
}

func (c *Capacity) leads(holder string) bool {
	return c.holder == holder && c.clock.Now().Before(c.leaseTill)
}

// SetReasons implements dispatch.Capacity: it replaces every reason.
func (c *Capacity) SetReasons(_ context.Context, reasons map[gangway.JobID]gangway.Waiting) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reasons = maps.Clone(reasons)
	return nil
}

// StartBurst implements dispatch.Capacity: under the lease, a job queued at
// attempt leaves the queue and its request is recorded.
func (c *Capacity) StartBurst(_ context.Context, holder string, jobID gangway.JobID, attempt int, request []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.leads(holder) {
		return fmt.Errorf("burst %s: %w", jobID, capacity.ErrNotLeader)
	}
	if e, ok := c.queue[jobID]; !ok || e.Attempt != attempt {
		return fmt.Errorf("burst %s attempt %d: %w", jobID, attempt, capacity.ErrStale)
	}
	delete(c.queue, jobID)
	c.queueSorted = nil
	c.bursting[jobID] = slices.Clone(request)
	return nil
}

// Bursts implements dispatch.Capacity.
func (c *Capacity) Bursts(context.Context) (map[gangway.JobID][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.bursting), nil
}

// ForgetBurst implements dispatch.Capacity.
func (c *Capacity) ForgetBurst(_ context.Context, jobID gangway.JobID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.bursting, jobID)
	return nil
}
