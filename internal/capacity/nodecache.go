package capacity

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gangwayhq/gangway"
)

// readCache lets a read fetch and decode only what changed since the last
// one. At ten thousand nodes a whole read moves megabytes of node records
// that almost never change, and decoding them is most of a snapshot's cost.
//
// Every script that writes or removes a node's record or state (register,
// set_state, gpu_health, remove_node, restore) takes a new revision from
// P:rev and records it in the node changes log, P:node-changes, a sorted
// set of node IDs by revision; read.lua sends the nodes whose revision is
// above the one the cache is at — their records, states, heartbeats and
// tasks, or that they are gone — and the heartbeats and tasks of the nodes
// that beat since the cache's last read (the heartbeat hash is walked
// inside Redis; only those travel). Queue entries are logged the same way
// (P:queue-changes: enqueue writes one, commit, burst and dequeue remove
// one), so a read sends only the entries written or removed since the
// cache's queue revision, and the cache keeps the queue sorted: a read
// that finds no change sorts nothing. A read's reply grows with what
// changed, not with the fleet or the queue.
//
// A removal stays in its log until the log holds 8,192 more IDs than its
// hash; read.lua then forgets removals older than 8,192 revisions and
// raises P:changes-floor above them, and a cache at a revision below the
// floor reads whole. P:epoch names the view's lifetime: it is written by
// the first read of a new or flushed view, so a cache from before a
// FLUSHALL or a failover to an empty replica never matches it and the next
// read is whole. A view that went back in time — a failover to a replica
// that missed writes, a restart from an older snapshot — keeps its epoch:
// that a View tells by the latest change it knows the view made (seen,
// below), which every read sends. Each read also checks the cache holds as many nodes and
// queue entries as Redis: an entry written or removed without its log (by
// an earlier version) makes the next read whole. An entry overwritten in
// place without its log would stay stale in the cache; for the queue,
// Commit, which checks every entry it places against Redis, then finds the
// plan stale and the queue is read whole again (forgetQueue).
//
// Allocations are logged the same way (P:alloc-changes: commit and
// restore write one, release removes one), and the GPUs held, whole or in
// shares, are not read at all: they are the cached allocations' members,
// which the scripts that write P:gpus and P:shares write together with
// them (TestViewProperties checks the two agree, through the cache and
// whole). Checkpoints, which agents record, are still read whole.
type readCache struct {
	mu    sync.Mutex
	epoch string
	rev   int64
	nodes map[string]gangway.Node
	// order is the IDs of nodes, sorted.
	order []string
	// states, beats (Unix ms) and tasks (JSON) are the nodes' as last
	// sent; beatMark is the server's time (Unix ms) at the read that sent
	// them.
	states   map[string]string
	beats    map[string]int64
	tasks    map[string]string
	beatMark int64
	// queueEpoch and queueRev are the epoch and revision queued is at;
	// sorted is its entries in queue order.
	queueEpoch string
	queueRev   int64
	queued     map[string]*queuedEntry
	sorted     []*queuedEntry
	// allocs is the allocations, at the epoch and revision the nodes are
	// at (every snapshot reads both); allocList is them sorted by job ID.
	allocs    map[string]allocRecord
	allocList []allocRecord
	// wholeReads counts the nodes, queues and allocations a read sent
	// whole (the first read, and any after a miss or a flush).
	wholeReads int
}

// allocSince is the revision a read asks for allocation changes after:
// the nodes' (read.lua reads the whole view when the epoch is not the
// cache's), or -1 (everything) when there is no allocation cache.
func (c *readCache) allocSince() int64 {
	if c.allocs == nil {
		return -1
	}
	return c.rev
}

// mergeAllocs brings the allocation cache up to the read from the changed
// records, which must leave it holding count, and returns them sorted by
// job ID: the cache's own, which callers only read.
func (c *readCache) mergeAllocs(changed []entryChange, whole bool, count int) ([]allocRecord, error) {
	if whole || c.allocs == nil {
		c.allocs, c.allocList = map[string]allocRecord{}, nil
	}
	if whole {
		c.wholeReads++
	}
	for _, ch := range changed {
		if ch.Removed {
			delete(c.allocs, ch.ID)
			c.allocList = nil
			continue
		}
		var r allocRecord
		if err := json.Unmarshal([]byte(ch.Raw), &r); err != nil {
			c.allocs, c.epoch = nil, "" // read whole next time
			return nil, fmt.Errorf("decode allocation %s: %w", ch.ID, err)
		}
		c.allocs[ch.ID] = r
		c.allocList = nil
	}
	if len(c.allocs) != count {
		// Allocations written or removed without their log. Read whole.
		err := fmt.Errorf("%d allocations cached, %d held: %w", len(c.allocs), count, errCacheMiss)
		c.allocs, c.epoch = nil, ""
		return nil, err
	}
	if c.allocList == nil {
		c.allocList = slices.SortedFunc(maps.Values(c.allocs), func(a, b allocRecord) int {
			return strings.Compare(a.Assignment.JobID, b.Assignment.JobID)
		})
	}
	return c.allocList, nil
}

// queueSince is the queue revision a read asks for changes after: -1
// (everything) unless the queue cache is of the epoch the nodes are at.
func (c *readCache) queueSince() int64 {
	if c.queued == nil || c.queueEpoch == "" || c.queueEpoch != c.epoch {
		return -1
	}
	return c.queueRev
}

// forgetQueue makes the next read fetch the whole queue.
func (c *readCache) forgetQueue() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queueEpoch, c.queued, c.sorted = "", nil, nil
}

// queuedEntry is one cached queue entry; gone marks one that left the
// queue or was replaced.
type queuedEntry struct {
	e    gangway.QueueEntry
	gone bool
}

// insertAtMost: a read with more changed entries than this sorts the
// queue again instead of inserting each in place.
const insertAtMost = 32

// mergeQueue brings the queue cache to rev from the changed entries,
// which must leave it holding count entries, and returns the queue in
// queue order, a slice of the caller's own. whole says whether changed
// holds every entry. Its work beyond copying the queue out is
// proportional to what changed.
func (c *readCache) mergeQueue(epoch string, rev int64, changed []entryChange, whole bool, count int) ([]gangway.QueueEntry, error) {
	if whole || c.queueEpoch != epoch || c.queued == nil {
		c.queued, c.sorted = map[string]*queuedEntry{}, nil
	}
	if whole {
		c.wholeReads++
	}
	var fresh []*queuedEntry
	removed := false
	for _, ch := range changed {
		if old, ok := c.queued[ch.ID]; ok {
			old.gone, removed = true, true
			delete(c.queued, ch.ID)
		}
		if ch.Removed {
			continue
		}
		p := &queuedEntry{}
		if err := json.Unmarshal([]byte(ch.Raw), &p.e); err != nil {
			c.queueEpoch = "" // read whole next time
			return nil, fmt.Errorf("decode queue entry %s: %w", ch.ID, err)
		}
		c.queued[ch.ID] = p
		fresh = append(fresh, p)
	}
	if len(c.queued) != count {
		// Redis holds entries the log did not name, or lacks some it
		// did not say were removed. Read whole again.
		c.queueEpoch, c.epoch = "", ""
		return nil, fmt.Errorf("%d queue entries cached, %d queued: %w", len(c.queued), count, errCacheMiss)
	}
	if len(fresh) > 0 || removed || c.sorted == nil {
		// The entries kept stay in order; the changed ones are put in
		// place among them.
		kept := c.sorted[:0]
		for _, p := range c.sorted {
			if !p.gone {
				kept = append(kept, p)
			}
		}
		clear(c.sorted[len(kept):])
		cmpEntries := func(a, b *queuedEntry) int { return compareQueue(&a.e, &b.e) }
		if len(fresh) > insertAtMost {
			kept = append(kept, fresh...)
			slices.SortFunc(kept, cmpEntries)
		} else {
			for _, p := range fresh {
				i, _ := slices.BinarySearchFunc(kept, p, cmpEntries)
				kept = slices.Insert(kept, i, p)
			}
		}
		c.sorted = kept
	}
	c.queueEpoch, c.queueRev = epoch, rev
	out := make([]gangway.QueueEntry, len(c.sorted))
	for i, p := range c.sorted {
		out[i] = p.e
	}
	return out, nil
}

// mergeNodes brings the cache to rev from the changed records, which must
// leave it holding count nodes, and returns the nodes sorted by ID. whole
// says whether changed holds every node (the read ignored the cache).
// The nodes' GPU slices are the cache's: callers only read them.
func (c *readCache) mergeNodes(epoch string, rev int64, changed []entryChange, whole bool, count int) ([]gangway.Node, error) {
	if whole || c.epoch != epoch || c.nodes == nil {
		c.nodes, c.order = map[string]gangway.Node{}, nil
	}
	if whole {
		c.wholeReads++
	}
	for _, ch := range changed {
		_, known := c.nodes[ch.ID]
		if ch.Removed {
			if known {
				delete(c.nodes, ch.ID)
				c.order = nil
			}
			continue
		}
		var n gangway.Node
		if err := json.Unmarshal([]byte(ch.Raw), &n); err != nil {
			c.epoch = "" // read whole next time
			return nil, fmt.Errorf("decode node %s: %w", ch.ID, err)
		}
		// Clipped, so that a caller appending to it copies it.
		n.GPUs = slices.Clip(n.GPUs)
		c.nodes[ch.ID] = n
		if !known {
			c.order = nil
		}
	}
	if len(c.nodes) != count {
		// Redis holds nodes the log did not name (registered by a
		// version that kept no log), or lacks some it did not say were
		// removed. Read whole next time.
		c.epoch = ""
		return nil, fmt.Errorf("%d nodes cached, %d registered: %w", len(c.nodes), count, errCacheMiss)
	}
	if c.order == nil {
		c.order = slices.Sorted(maps.Keys(c.nodes))
	}
	c.epoch, c.rev = epoch, rev
	out := make([]gangway.Node, len(c.order))
	for i, id := range c.order {
		out[i] = c.nodes[id]
	}
	return out, nil
}

// mergeNodeStatus brings the nodes' states, heartbeats and tasks up to
// the read made at now; a removed node's come as removed.
func (c *readCache) mergeNodeStatus(whole bool, states, beats, tasks []entryChange, now time.Time) {
	if whole || c.states == nil {
		c.states, c.beats, c.tasks = map[string]string{}, map[string]int64{}, map[string]string{}
	}
	apply(c.states, states)
	apply(c.tasks, tasks)
	for _, ch := range beats {
		if ms, err := strconv.ParseInt(ch.Raw, 10, 64); err == nil && !ch.Removed {
			c.beats[ch.ID] = ms
		} else {
			delete(c.beats, ch.ID)
		}
	}
	c.beatMark = now.UnixMilli()
}

// apply sets or removes each changed entry of m.
func apply(m map[string]string, changes []entryChange) {
	for _, ch := range changes {
		if ch.Removed {
			delete(m, ch.ID)
		} else {
			m[ch.ID] = ch.Raw
		}
	}
}

// seen is the latest change a View knows the view made, read or written
// by its own commits: its generation, its revision and the entry whose
// change took that revision (its witness, "<log>:<ID>", read.lua). Every
// read sends it; one that finds the view of an older generation, at an
// older revision, or with the witness's entry last changed before it,
// knows the view went back in time and begins a new generation (doc.go's
// Rebuilding). Writes made after the view went back take revisions from
// the old count again, so the revision alone would not tell.
type seen struct {
	mu      sync.Mutex
	gen     string
	rev     int64
	witness string
}

func (s *seen) get() (gen string, rev int64, witness string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen, s.rev, s.witness
}

// advance records the change at rev of generation gen that witness names,
// if it is later than the one held: of another generation (a read returns
// the view's current one, a commit the one it was fenced by), or at a
// later revision.
func (s *seen) advance(gen string, rev int64, witness string) {
	if gen == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.gen || rev > s.rev {
		s.gen, s.rev, s.witness = gen, rev, witness
	}
}
