package capacity

import (
	"encoding/json"
	"fmt"
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
// Queue entries and allocations change with every placement, so they are
// read whole, but each is decoded only when its JSON differs from the one
// decoded last time.
type readCache struct {
	mu    sync.Mutex
	epoch string
	rev   int64
	nodes map[string]gangway.Node
	queue memo[gangway.QueueEntry]
	alloc memo[allocRecord]
}

// mergeNodes brings the cache to rev from the changed records (ID → JSON),
// keeping exactly the nodes in ids, and returns the nodes. whole says
// whether changed holds every node (the read ignored the cache).
func (c *readCache) mergeNodes(epoch string, rev int64, ids []string, changed map[string]string, whole bool) (map[string]gangway.Node, error) {
	if whole || c.epoch != epoch || c.nodes == nil {
		c.nodes = map[string]gangway.Node{}
	}
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
			// A node the cache never saw, with no newer revision: written
			// before revisions were kept. Read whole next time.
			c.epoch = ""
			return nil, fmt.Errorf("node %s: %w", id, errCacheMiss)
		}
		next[id] = n
	}
	c.epoch, c.rev, c.nodes = epoch, rev, next
	// Callers get their own GPU slices, so none can change the cache.
	out := make(map[string]gangway.Node, len(next))
	for id, n := range next {
		n.GPUs = slices.Clone(n.GPUs)
		out[id] = n
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
