package capacity

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/gangwayhq/gangway"
)

// readCache lets a read fetch and decode only what changed since the last
// one. At ten thousand nodes a whole read moves megabytes of node records
// that almost never change, and decoding them is most of a snapshot's cost.
//
// Node records carry revisions: every script that writes one (register,
// gpu_health) takes a new revision from P:rev and records it in
// P:node-revs, and read.lua sends only the records whose revision is above
// the one the cache is at. P:epoch names the view's lifetime: it is
// written by the first read of a new or flushed view, so a cache from
// before a FLUSHALL or a failover to an empty replica never matches it and
// the next read is whole.
//
// Queue entries take revisions from P:rev too (P:queue-revs, written by
// enqueue.lua), so a read sends only the entries written since the cache's
// queue revision, and the cache keeps the queue sorted: a read that finds
// no change sorts nothing. A queue entry overwritten by a version that
// kept no revisions would stay stale in the cache; Commit, which checks
// every entry it places against Redis, then finds the plan stale and the
// queue is read whole again (forgetQueue).
//
// Allocations are read whole, but each is decoded only when its JSON
// differs from the one decoded last time.
type readCache struct {
	mu    sync.Mutex
	epoch string
	rev   int64
	nodes map[string]gangway.Node
	// order is the IDs of nodes, sorted.
	order []string
	// queueEpoch and queueRev are the epoch and revision queued is at;
	// sorted is its entries in queue order.
	queueEpoch string
	queueRev   int64
	queued     map[string]*queuedEntry
	sorted     []*queuedEntry
	mark       uint64
	alloc      memo[allocRecord]
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

// queuedEntry is one cached queue entry; seen is the mark of the last
// read that listed it.
type queuedEntry struct {
	e    gangway.QueueEntry
	seen uint64
}

// insertAtMost: a read with more changed entries than this sorts the
// queue again instead of inserting each in place.
const insertAtMost = 32

// mergeQueue brings the queue cache to rev from the changed entries (ID →
// JSON), keeping exactly the jobs in ids, and returns the queue in queue
// order, a slice of the caller's own. whole says whether changed holds
// every entry. Its work beyond one lookup per queued job is proportional
// to what changed.
func (c *readCache) mergeQueue(epoch string, rev int64, ids []string, changed map[string]string, whole bool) ([]gangway.QueueEntry, error) {
	if whole || c.queueEpoch != epoch || c.queued == nil {
		c.queued, c.sorted = map[string]*queuedEntry{}, nil
	}
	c.mark++
	var fresh []*queuedEntry
	for _, id := range ids {
		if raw, ok := changed[id]; ok {
			p := &queuedEntry{seen: c.mark}
			if err := json.Unmarshal([]byte(raw), &p.e); err != nil {
				c.queueEpoch = "" // read whole next time
				return nil, fmt.Errorf("decode queue entry %s: %w", id, err)
			}
			c.queued[id] = p // an older entry of the job is no longer seen
			fresh = append(fresh, p)
			continue
		}
		p, ok := c.queued[id]
		if !ok {
			// An entry the cache never saw, with no newer revision:
			// written by a version that kept none. Read whole again.
			c.queueEpoch, c.epoch = "", ""
			return nil, fmt.Errorf("queue entry %s: %w", id, errCacheMiss)
		}
		p.seen = c.mark
	}
	removed := len(c.queued) != len(ids)
	if removed {
		for id, p := range c.queued {
			if p.seen != c.mark {
				delete(c.queued, id)
			}
		}
	}
	if len(fresh) > 0 || removed || c.sorted == nil {
		// The entries kept stay in order; the changed ones are put in
		// place among them.
		kept := c.sorted[:0]
		for _, p := range c.sorted {
			if p.seen == c.mark {
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

// mergeNodes brings the cache to rev from the changed records (ID → JSON),
// keeping exactly the nodes in ids, and returns the nodes sorted by ID.
// whole says whether changed holds every node (the read ignored the
// cache).
func (c *readCache) mergeNodes(epoch string, rev int64, ids []string, changed map[string]string, whole bool) ([]gangway.Node, error) {
	if whole || c.epoch != epoch || c.nodes == nil {
		c.nodes, c.order = map[string]gangway.Node{}, nil
	}
	// Most reads change nothing: the same nodes, no record newer.
	same := len(changed) == 0 && len(ids) == len(c.nodes)
	for i := 0; same && i < len(ids); i++ {
		_, same = c.nodes[ids[i]]
	}
	if !same {
		next := make(map[string]gangway.Node, len(ids))
		for _, id := range ids {
			if raw, ok := changed[id]; ok {
				var n gangway.Node
				if err := json.Unmarshal([]byte(raw), &n); err != nil {
					c.epoch = "" // read whole next time
					return nil, fmt.Errorf("decode node %s: %w", id, err)
				}
				next[id] = n
				continue
			}
			n, ok := c.nodes[id]
			if !ok {
				// A node the cache never saw, with no newer revision:
				// written before revisions were kept. Read whole next
				// time.
				c.epoch = ""
				return nil, fmt.Errorf("node %s: %w", id, errCacheMiss)
			}
			next[id] = n
		}
		c.nodes, c.order = next, nil
	}
	if c.order == nil {
		c.order = slices.Sorted(maps.Keys(c.nodes))
	}
	c.epoch, c.rev = epoch, rev
	// Callers get their own GPU slices, so none can change the cache: one
	// backing array for all of them.
	total := 0
	for _, n := range c.nodes {
		total += len(n.GPUs)
	}
	gpus := make([]gangway.GPU, 0, total)
	out := make([]gangway.Node, len(c.order))
	for i, id := range c.order {
		n := c.nodes[id]
		if n.GPUs != nil {
			first := len(gpus)
			gpus = append(gpus, n.GPUs...)
			n.GPUs = gpus[first:len(gpus):len(gpus)]
		}
		out[i] = n
	}
	return out, nil
}

// memo remembers the value decoded from each key's last JSON.
type memo[T any] map[string]memoEntry[T]

type memoEntry[T any] struct {
	raw string
	v   T
}

// decodeAll decodes every key's JSON in raw, reusing the value of any
// whose JSON is unchanged, and forgets keys no longer present. Values are
// returned as they were decoded: callers copy what they change.
func (m *memo[T]) decodeAll(raw map[string]string, what string) ([]T, error) {
	next := make(memo[T], len(raw))
	out := make([]T, 0, len(raw))
	for k, s := range raw {
		e, ok := (*m)[k]
		if !ok || e.raw != s {
			e = memoEntry[T]{raw: s}
			if err := json.Unmarshal([]byte(s), &e.v); err != nil {
				return nil, fmt.Errorf("decode %s %s: %w", what, k, err)
			}
		}
		next[k] = e
		out = append(out, e.v)
	}
	*m = next
	return out, nil
}
