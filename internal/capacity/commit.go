package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
)

// Snapshot is the view at one instant, read in one script: what the
// dispatch loop plans from. Now is the Redis server's clock, so every
// dispatcher agrees on it.
type Snapshot struct {
	Now time.Time
	// Nodes are sorted by ID. Their GPU slices are shared with the view's
	// read cache and with other snapshots: read them, never write to them
	// (copy a node's GPUs to change them). Allocated is nil on a node
	// with no whole GPU held.
	Nodes []gangway.NodeStatus
	Queue []gangway.QueueEntry // in queue order
	// Allocations are the committed assignments, sorted by job ID (what
	// preemption may choose victims from).
	Allocations []gangway.Assignment
	// Generation names the view's lifetime (rebuild.go); Rebuilt is
	// whether the view has been rebuilt for it. Until it has, the dispatch
	// loop places nothing: a GPU's owner may be unknown.
	Generation string
	Rebuilt    bool
	// Revision is the view's revision at the read (P:rev): what was
	// written before the snapshot was taken has a revision no larger.
	Revision int64
}

// Snapshot reads nodes, allocations and the queue consistently.
func (v *View) Snapshot(ctx context.Context) (Snapshot, error) {
	s, err := v.read(ctx, true)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	return s, nil
}

// The checks Commit makes, in the order it makes them; CommitError.Check is
// one of these.
const (
	CheckLease        = "lease"          // the caller holds the dispatch lease
	CheckGeneration   = "generation"     // the view is the one the plan was made from
	CheckDuplicateJob = "duplicate-job"  // a job appears once in the plan
	CheckNotQueued    = "not-queued"     // the job is still queued
	CheckAttempt      = "attempt"        // with exactly the plan's attempt
	CheckAllocated    = "allocated"      // and holds no allocation
	CheckNodeMissing  = "node-missing"   // every member's node is registered
	CheckNodeNotReady = "node-not-ready" // and ready
	CheckGPUMissing   = "gpu-missing"    // every GPU index exists on its node
	CheckGPUBusy      = "gpu-busy"       // and is free
	CheckGPUTwice     = "gpu-twice"      // and is claimed once in the plan
	CheckGPUFull      = "gpu-full"       // shares of a GPU sum to at most 1000 milli
)

// CommitError says which check rejected a plan. It wraps ErrStale, or
// ErrNotLeader for CheckLease.
type CommitError struct {
	Check  string
	JobID  gangway.JobID // "" for CheckLease
	NodeID string        // "" unless the check is about a node or GPU
	GPU    int           // -1 unless the check is about one GPU
	Detail string
	err    error
}

func (e *CommitError) Error() string {
	var b strings.Builder
	b.WriteString(e.err.Error())
	b.WriteString(": ")
	if e.JobID != "" {
		b.WriteString("job " + e.JobID + ": ")
	}
	if e.NodeID != "" {
		b.WriteString("node " + e.NodeID + ": ")
	}
	if e.GPU >= 0 {
		b.WriteString("gpu " + strconv.Itoa(e.GPU) + ": ")
	}
	b.WriteString(e.Detail)
	return b.String()
}

// Unwrap returns ErrStale or ErrNotLeader.
func (e *CommitError) Unwrap() error { return e.err }

// planItem is one assignment as commit.lua reads it.
type planItem struct {
	Job        string       `json:"job"`
	Attempt    int          `json:"attempt"`
	Members    []planMember `json:"members"`
	Assignment string       `json:"assignment"` // stored verbatim
}

type planMember struct {
	Node  string `json:"node"`
	GPUs  []int  `json:"gpus"`
	Milli int    `json:"milli,omitempty"` // share of each GPU; 0: whole
}

// allocRecord is a P:allocs value.
type allocRecord struct {
	CPUMilli   int64              `json:"cpuMilli"` // per member
	MemMiB     int64              `json:"memMiB"`   // per member
	Assignment gangway.Assignment `json:"assignment"`
}

// Commit records the whole plan atomically, in one script. For every
// assignment it checks that holder holds the dispatch lease, the job is
// still queued with exactly a.Attempt and holds no allocation, every
// member's node is registered and ready, and every GPU exists on its node,
// is free, and is claimed once in the plan. If any check fails nothing is
// written and the error is a *CommitError wrapping ErrStale (or
// ErrNotLeader) that names the check, job, node and GPU. Otherwise the jobs
// leave the queue, each GPU is marked as the job's, and each allocation is
// recorded with the CPU and memory of its queue entry.
//
// An empty plan is a no-op. A malformed plan (no members, empty IDs) is an
// error that wraps neither sentinel: it is a bug in the planner.
func (v *View) Commit(ctx context.Context, holder string, plan []gangway.Assignment) error {
	return v.CommitIn(ctx, holder, "", plan)
}

// CommitIn is Commit fenced by the view's generation too: a plan made from
// a snapshot of generation gen (Snapshot.Generation) is stale once the
// view was flushed or replaced (CheckGeneration). gen "" skips the check.
func (v *View) CommitIn(ctx context.Context, holder, gen string, plan []gangway.Assignment) error {
	if len(plan) == 0 {
		return nil
	}
	items := make([]planItem, 0, len(plan))
	for _, a := range plan {
		if err := validateAssignment(a); err != nil {
			return fmt.Errorf("commit: invalid plan: %w", err)
		}
		b, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("commit: encode assignment %s: %w", a.JobID, err)
		}
		it := planItem{Job: a.JobID, Attempt: a.Attempt, Assignment: string(b)}
		for _, m := range a.Members {
			gpus := m.GPUs
			if gpus == nil {
				gpus = []int{} // cjson must see a list, not null
			}
			it.Members = append(it.Members, planMember{Node: m.NodeID, GPUs: gpus, Milli: m.Milli})
		}
		items = append(items, it)
	}
	arg, err := json.Marshal(items)
	if err != nil {
		return fmt.Errorf("commit: encode plan: %w", err)
	}
	keys := []string{v.k.queue, v.k.allocs, v.k.gpus, v.k.nodes, v.k.nodeState, v.k.lease, v.k.reasons, v.k.shares, v.k.epoch,
		v.k.queueChanges, v.k.rev, v.k.allocChanges}
	res, err := commitScript.Run(ctx, v.rdb, keys, holder, arg, gen).Slice()
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if len(res) == 5 && res[0] == "ok" {
		epoch, _ := res[2].(string)
		rev, _ := res[3].(int64)
		witness, _ := res[4].(string)
		v.seen.advance(epoch, rev, witness)
		return nil
	}
	ce, err := parseCommitError(res)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if ce.Check == CheckNotQueued || ce.Check == CheckAttempt {
		// Usually a job that left the queue since the snapshot; but it
		// may be a queue entry the read cache holds stale (nodecache.go):
		// the next snapshot reads the queue whole.
		v.cache.forgetQueue()
	}
	return fmt.Errorf("commit: %w", ce)
}

func validateAssignment(a gangway.Assignment) error {
	if a.JobID == "" {
		return errors.New("assignment with empty job id")
	}
	if len(a.Members) == 0 {
		return fmt.Errorf("job %s: no members", a.JobID)
	}
	for _, m := range a.Members {
		if m.NodeID == "" {
			return fmt.Errorf("job %s: rank %d: empty node id", a.JobID, m.Rank)
		}
	}
	return nil
}

func parseCommitError(res []any) (*CommitError, error) {
	if len(res) != 6 {
		return nil, fmt.Errorf("unexpected script reply %v", res)
	}
	kind, _ := res[0].(string)
	check, _ := res[1].(string)
	job, _ := res[2].(string)
	node, _ := res[3].(string)
	gpu, _ := res[4].(int64)
	detail, _ := res[5].(string)
	ce := &CommitError{Check: check, JobID: job, NodeID: node, GPU: int(gpu), Detail: detail}
	switch kind {
	case "stale":
		ce.err = ErrStale
	case "not-leader":
		ce.err = ErrNotLeader
	default:
		return nil, fmt.Errorf("unexpected script reply %v", res)
	}
	return ce, nil
}

// Release frees every GPU the job holds and drops its allocation, but only
// if the allocation's attempt is <= attempt: a late release from an old
// attempt never frees a newer attempt's GPUs. It is idempotent and returns
// the number of GPUs freed (0 when there was nothing to free).
func (v *View) Release(ctx context.Context, jobID gangway.JobID, attempt int) (int, error) {
	n, err := releaseScript.Run(ctx, v.rdb, []string{v.k.allocs, v.k.gpus, v.k.shares, v.k.checkpoints, v.k.allocChanges, v.k.rev}, jobID, attempt).Int()
	if err != nil {
		return 0, fmt.Errorf("release %s: %w", jobID, err)
	}
	if n > 0 {
		v.announce(ctx, EventReleased)
	}
	return n, nil
}

// Allocation returns the job's committed assignment, or ErrNotFound.
func (v *View) Allocation(ctx context.Context, jobID gangway.JobID) (gangway.Assignment, error) {
	s, err := v.rdb.HGet(ctx, v.k.allocs, jobID).Result()
	if errors.Is(err, redis.Nil) {
		return gangway.Assignment{}, fmt.Errorf("allocation %s: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return gangway.Assignment{}, fmt.Errorf("allocation %s: %w", jobID, err)
	}
	var r allocRecord
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return gangway.Assignment{}, fmt.Errorf("allocation %s: decode: %w", jobID, err)
	}
	return r.Assignment, nil
}

// Allocations returns every committed assignment, sorted by job ID.
func (v *View) Allocations(ctx context.Context) ([]gangway.Assignment, error) {
	raw, err := v.rdb.HGetAll(ctx, v.k.allocs).Result()
	if err != nil {
		return nil, fmt.Errorf("allocations: %w", err)
	}
	recs, err := decodeAllocs(raw)
	if err != nil {
		return nil, fmt.Errorf("allocations: %w", err)
	}
	out := make([]gangway.Assignment, len(recs))
	for i, r := range recs {
		out[i] = r.Assignment
	}
	return out, nil
}

func decodeAllocs(raw map[string]string) ([]allocRecord, error) {
	recs := make([]allocRecord, 0, len(raw))
	for id, s := range raw {
		var r allocRecord
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			return nil, fmt.Errorf("decode allocation %s: %w", id, err)
		}
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b allocRecord) int { return strings.Compare(a.Assignment.JobID, b.Assignment.JobID) })
	return recs, nil
}

// errCacheMiss: the read cache lacks a node that Redis did not send.
var errCacheMiss = errors.New("not in the read cache")

// read runs read.lua and assembles a Snapshot (Queue only if withQueue),
// fetching only the node records that changed since the last read. A
// cache miss (a node written before revisions were kept) reads again whole.
func (v *View) read(ctx context.Context, withQueue bool) (Snapshot, error) {
	v.cache.mu.Lock()
	defer v.cache.mu.Unlock()
	s, err := v.readOnce(ctx, withQueue)
	if errors.Is(err, errCacheMiss) {
		s, err = v.readOnce(ctx, withQueue)
	}
	return s, err
}

func (v *View) readOnce(ctx context.Context, withQueue bool) (Snapshot, error) {
	c := &v.cache
	flag := "0"
	if withQueue {
		flag = "1"
	}
	gen, at, witness := v.seen.get()
	res, err := readScript.Run(ctx, v.rdb, v.readKeys(), flag, c.epoch, c.rev, c.queueSince(), c.beatMark, c.allocSince(),
		gen, at, witness).Slice()
	if err != nil {
		return Snapshot{}, err
	}
	if len(res) != 18 {
		return Snapshot{}, fmt.Errorf("unexpected script reply of %d items", len(res))
	}
	var s Snapshot
	if s.Now, err = parseTime(res[0]); err != nil {
		return Snapshot{}, err
	}
	epoch, _ := res[1].(string)
	rev, _ := res[2].(int64)
	rebuilt, _ := res[15].(string)
	s.Generation, s.Rebuilt, s.Revision = epoch, epoch != "" && rebuilt == epoch, rev
	lists := make([][]entryChange, 0, 6)
	for _, r := range []any{res[5], res[6], res[7], res[8], res[11], res[14]} {
		l, err := changeList(r)
		if err != nil {
			return Snapshot{}, err
		}
		lists = append(lists, l)
	}
	changed, states, beats, tasks, queueChanged, allocChanged := lists[0], lists[1], lists[2], lists[3], lists[4], lists[5]
	saved, err := flatHash(res[16])
	if err != nil {
		return Snapshot{}, err
	}
	whole := func(i int) bool { w, _ := res[i].(int64); return w == 1 }
	count := func(i int) int { n, _ := res[i].(int64); return int(n) }
	witness, _ = res[17].(string)
	v.seen.advance(epoch, rev, witness)
	nodes, err := c.mergeNodes(epoch, rev, changed, whole(3), count(4))
	if err != nil {
		return Snapshot{}, err
	}
	c.mergeNodeStatus(whole(3), states, beats, tasks, s.Now)
	recs, err := c.mergeAllocs(allocChanged, whole(12), count(13))
	if err != nil {
		return Snapshot{}, err
	}

	byID := make(map[string]*gangway.NodeStatus, len(nodes))
	s.Nodes = make([]gangway.NodeStatus, len(nodes))
	for i, n := range nodes {
		st := gangway.NodeStatus{Node: n, State: c.states[n.ID]}
		if ms := c.beats[n.ID]; ms > 0 {
			st.LastHeartbeat = time.UnixMilli(ms)
			st.HeartbeatAge.Duration = max(s.Now.Sub(st.LastHeartbeat), 0)
		} else {
			// Never heard from, or made silent (ForgetHeartbeat: a lost
			// task, an agent that shut down): as silent as can be.
			st.HeartbeatAge.Duration = s.Now.Sub(time.UnixMilli(0))
		}
		s.Nodes[i] = st
		byID[n.ID] = &s.Nodes[i]
	}
	// The GPUs held are the allocations' members, as commit.lua records
	// them in P:gpus and P:shares: a member with 0 < milli < 1000 holds
	// that share of each of its GPUs, any other its GPUs whole.
	s.Allocations = make([]gangway.Assignment, len(recs))
	for i, r := range recs {
		a := r.Assignment
		s.Allocations[i] = a
		if at, ok := checkpointOf(saved[a.JobID], a.Attempt); ok && at.After(a.At) {
			s.Allocations[i].LastCheckpoint = at
		}
		for _, m := range a.Members {
			n := byID[m.NodeID]
			if n == nil {
				continue
			}
			n.UsedCPUMilli += r.CPUMilli
			n.UsedMemMiB += r.MemMiB
			if m.Share() {
				if n.Shared == nil {
					n.Shared = map[int]map[gangway.JobID]int{}
				}
				for _, g := range m.GPUs {
					if n.Shared[g] == nil {
						n.Shared[g] = map[gangway.JobID]int{}
					}
					n.Shared[g][a.JobID] += m.Milli
				}
				continue
			}
			if n.Allocated == nil {
				n.Allocated = make(map[int]gangway.JobID, len(m.GPUs))
			}
			for _, g := range m.GPUs {
				n.Allocated[g] = a.JobID
			}
		}
	}
	if err := reported(byID, c.tasks); err != nil {
		return Snapshot{}, err
	}

	if withQueue {
		if s.Queue, err = c.mergeQueue(epoch, rev, queueChanged, whole(9), count(10)); err != nil {
			return Snapshot{}, err
		}
	}
	return s, nil
}

// parseTime decodes a TIME reply: seconds and microseconds, as strings.
func parseTime(v any) (time.Time, error) {
	parts, ok := v.([]any)
	if !ok || len(parts) != 2 {
		return time.Time{}, fmt.Errorf("unexpected TIME reply %v", v)
	}
	var n [2]int64
	for i, p := range parts {
		s, _ := p.(string)
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("unexpected TIME reply %v: %w", v, err)
		}
		n[i] = x
	}
	return time.UnixMicro(n[0]*1_000_000 + n[1]), nil
}

// readKeys is read.lua's KEYS.
func (v *View) readKeys() []string {
	return []string{v.k.nodes, v.k.nodeState, v.k.heartbeat, v.k.queue, v.k.allocs, v.k.nodeChanges, v.k.rev,
		v.k.epoch, v.k.rebuilt, v.k.nodeTasks, v.k.checkpoints, v.k.queueChanges, v.k.changesFloor, v.k.allocChanges,
		v.k.gpus, v.k.shares, v.k.bursting}
}

// entryChange is one entry of a read's flat ID, value list of changes:
// the entry's new value, or its removal.
type entryChange struct {
	ID, Raw string
	Removed bool
}

// changeList decodes such a list: a nil value marks a removal.
func changeList(v any) ([]entryChange, error) {
	list, ok := v.([]any)
	if !ok || len(list)%2 != 0 {
		return nil, fmt.Errorf("unexpected changes reply %T", v)
	}
	out := make([]entryChange, 0, len(list)/2)
	for i := 0; i < len(list); i += 2 {
		id, ok := list[i].(string)
		if !ok {
			return nil, fmt.Errorf("unexpected changes reply item %T", list[i])
		}
		switch val := list[i+1].(type) {
		case nil:
			out = append(out, entryChange{ID: id, Removed: true})
		case string:
			out = append(out, entryChange{ID: id, Raw: val})
		default:
			return nil, fmt.Errorf("unexpected changes reply value %T of %s", val, id)
		}
	}
	return out, nil
}

// flatHash turns an HGETALL reply inside a script result into a map.
func flatHash(v any) (map[string]string, error) {
	list, ok := v.([]any)
	if !ok || len(list)%2 != 0 {
		return nil, fmt.Errorf("unexpected hash reply %T", v)
	}
	m := make(map[string]string, len(list)/2)
	for i := 0; i < len(list); i += 2 {
		k, ok1 := list[i].(string)
		val, ok2 := list[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("unexpected hash reply item %T %T", list[i], list[i+1])
		}
		m[k] = val
	}
	return m, nil
}

// RecordCheckpoint records that attempt of job saved a checkpoint at at;
// the newest save of the newest attempt is kept, and Snapshot reports it
// as the LastCheckpoint of the job's allocation of that attempt (what a
// move or a preemption would lose). Release drops it with the allocation.
func (v *View) RecordCheckpoint(ctx context.Context, jobID gangway.JobID, attempt int, at time.Time) error {
	err := checkpointScript.Run(ctx, v.rdb, []string{v.k.checkpoints}, jobID, attempt, at.UnixMilli()).Err()
	if err != nil {
		return fmt.Errorf("record checkpoint of %s: %w", jobID, err)
	}
	return nil
}

// checkpointOf decodes a P:checkpoints value, "<attempt>:<unix ms>", for
// attempt.
func checkpointOf(raw string, attempt int) (time.Time, bool) {
	a, ms, ok := strings.Cut(raw, ":")
	if !ok || a != strconv.Itoa(attempt) {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(n), true
}
