package capacity

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
)

// The view is rebuildable (DESIGN.md's invariant 6). Its generation is
// P:epoch, written by the first read of a new view — and so of a flushed
// one, or of a Redis restarted empty. P:rebuilt names the generation the
// view was last rebuilt for; until it is the current one the dispatch loop
// places nothing (Snapshot.Rebuilt), and Commit refuses a plan made from
// another generation. The rebuild (internal/dispatch) restores what holds
// the truth: each job workflow's queue entry (Enqueue) and the assignment
// whose GPUs it holds, and the cordons of the durable store (Restore); and
// every agent's heartbeat carries the tasks it runs (P:node-tasks), so a
// GPU running a task the view has no allocation for is shown held by that
// task's job (NodeStatus.Allocated or Shared) and never offered.

// Task is a task an agent reports running on its node.
type Task struct {
	JobID   gangway.JobID `json:"job"`
	Attempt int           `json:"attempt"`
	Rank    int           `json:"rank"`
	GPUs    []int         `json:"gpus"`
	// Milli is the share of each GPU it holds (0: whole GPUs).
	Milli int `json:"milli,omitempty"`
}

func encodeTasks(tasks []Task) (string, error) {
	if len(tasks) == 0 {
		return "", nil
	}
	b, err := json.Marshal(tasks)
	if err != nil {
		return "", fmt.Errorf("encode tasks: %w", err)
	}
	return string(b), nil
}

// Held is what a job workflow holds in the view, as the rebuild restores
// it: the assignment whose GPUs it holds, and its per-member CPU and
// memory (from its queue entry).
type Held struct {
	Assignment gangway.Assignment
	CPUMilli   int64
	MemMiB     int64
}

var (
	//go:embed scripts/restore.lua
	restoreLua string
	//go:embed scripts/mark_rebuilt.lua
	markRebuiltLua string

	restoreScript     = redis.NewScript(restoreLua)
	markRebuiltScript = redis.NewScript(markRebuiltLua)
)

// ErrGenerationChanged: the view was flushed or replaced again while the
// caller rebuilt it; nothing was written. Rebuild again.
var ErrGenerationChanged = errors.New("capacity: the view's generation changed")

// GenerationStart is when the generation began (its epoch is the Redis
// server's TIME then); zero if gen is not one.
func GenerationStart(gen string) time.Time {
	sec, usec, ok := strings.Cut(gen, ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	u, err2 := strconv.ParseInt(usec, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return time.Time{}
	}
	return time.Unix(s, u*1000)
}

// Restore writes what the rebuild of the view that snap read found:
// allocations (a job already allocated is left alone; one whose GPUs
// another holds is refused, and named in the result) and admin node
// states (node → gangway.NodeCordoned), which hold even for nodes not
// registered again yet. A non-nil states is every cordon there is, read
// after snap: a node the view showed cordoned at snap that states lacks
// is made ready (a view that went back in time may hold a cordon lifted
// since), one cordoned after snap is left so; nil leaves the view's
// cordons as they are. Fenced by the lease and snap's generation:
// ErrNotLeader, ErrGenerationChanged.
func (v *View) Restore(ctx context.Context, holder string, snap Snapshot, held []Held, states map[string]string) (restored int, refused []string, err error) {
	type member struct {
		Node  string `json:"node"`
		GPUs  []int  `json:"gpus"`
		Milli int    `json:"milli"`
	}
	type item struct {
		Job        gangway.JobID `json:"job"`
		Attempt    int           `json:"attempt"`
		CPUMilli   int64         `json:"cpuMilli"`
		MemMiB     int64         `json:"memMiB"`
		Members    []member      `json:"members"`
		Assignment string        `json:"assignment"`
	}
	items := make([]item, 0, len(held))
	for _, h := range held {
		a := h.Assignment
		if err := validateAssignment(a); err != nil {
			return 0, nil, fmt.Errorf("restore: %w", err)
		}
		b, err := json.Marshal(a)
		if err != nil {
			return 0, nil, fmt.Errorf("restore: encode assignment %s: %w", a.JobID, err)
		}
		it := item{Job: a.JobID, Attempt: a.Attempt, CPUMilli: h.CPUMilli, MemMiB: h.MemMiB, Assignment: string(b)}
		for _, m := range a.Members {
			gpus := m.GPUs
			if gpus == nil {
				gpus = []int{}
			}
			it.Members = append(it.Members, member{Node: m.NodeID, GPUs: gpus, Milli: m.Milli})
		}
		items = append(items, it)
	}
	rawItems, err := json.Marshal(items)
	if err != nil {
		return 0, nil, fmt.Errorf("restore: %w", err)
	}
	asOf := strconv.FormatInt(snap.Revision, 10)
	if states == nil {
		states, asOf = map[string]string{}, ""
	}
	rawStates, err := json.Marshal(states)
	if err != nil {
		return 0, nil, fmt.Errorf("restore: %w", err)
	}
	keys := []string{v.k.allocs, v.k.gpus, v.k.shares, v.k.lease, v.k.epoch, v.k.nodeState, v.k.nodeChanges, v.k.rev, v.k.allocChanges}
	res, err := restoreScript.Run(ctx, v.rdb, keys, holder, snap.Generation, rawItems, rawStates, asOf).Slice()
	if err != nil {
		return 0, nil, fmt.Errorf("restore: %w", err)
	}
	if len(res) < 2 {
		return 0, nil, fmt.Errorf("restore: unexpected reply %v", res)
	}
	switch res[0] {
	case "not-leader":
		return 0, nil, fmt.Errorf("restore: %w", ErrNotLeader)
	case "stale":
		return 0, nil, fmt.Errorf("restore: %w", ErrGenerationChanged)
	}
	n, _ := res[1].(int64)
	for _, r := range res[2:] {
		if s, ok := r.(string); ok {
			refused = append(refused, s)
		}
	}
	if n > 0 {
		v.announce(ctx, EventReleased)
	}
	return int(n), refused, nil
}

// MarkRebuilt records that generation gen is rebuilt: the dispatch loop
// places jobs again. ErrNotLeader, ErrGenerationChanged.
func (v *View) MarkRebuilt(ctx context.Context, holder, gen string) error {
	res, err := markRebuiltScript.Run(ctx, v.rdb, []string{v.k.lease, v.k.epoch, v.k.rebuilt}, holder, gen).Text()
	switch {
	case err != nil:
		return fmt.Errorf("mark rebuilt: %w", err)
	case res == "not-leader":
		return fmt.Errorf("mark rebuilt: %w", ErrNotLeader)
	case res == "stale":
		return fmt.Errorf("mark rebuilt: %w", ErrGenerationChanged)
	}
	return nil
}

// Rebuilt reports whether the view is rebuilt for its current generation,
// for a readiness probe. A view that has no generation yet is not.
func (v *View) Rebuilt(ctx context.Context) (bool, error) {
	vals, err := v.rdb.MGet(ctx, v.k.epoch, v.k.rebuilt).Result()
	if err != nil {
		return false, fmt.Errorf("view generation: %w", err)
	}
	gen, _ := vals[0].(string)
	done, _ := vals[1].(string)
	return gen != "" && gen == done, nil
}

// reported marks the GPUs of tasks the agents report running that the
// view has no allocation for as held by the task's job, so they are never
// offered (the view was lost and is being rebuilt, or an orphan runs on).
func reported(byID map[string]*gangway.NodeStatus, tasks map[string]string) error {
	for nodeID, raw := range tasks {
		n := byID[nodeID]
		if n == nil {
			continue
		}
		var list []Task
		if err := json.Unmarshal([]byte(raw), &list); err != nil {
			return fmt.Errorf("decode tasks of node %s: %w", nodeID, err)
		}
		for _, t := range list {
			for _, g := range t.GPUs {
				if t.Milli > 0 && t.Milli < gangway.MilliPerGPU {
					if _, ok := n.Shared[g][t.JobID]; ok || n.Allocated[g] != "" {
						continue
					}
					if n.Shared == nil {
						n.Shared = map[int]map[gangway.JobID]int{}
					}
					if n.Shared[g] == nil {
						n.Shared[g] = map[gangway.JobID]int{}
					}
					n.Shared[g][t.JobID] += t.Milli
					continue
				}
				if _, held := n.Allocated[g]; held || len(n.Shared[g]) > 0 {
					continue
				}
				if n.Allocated == nil {
					n.Allocated = map[int]gangway.JobID{}
				}
				n.Allocated[g] = t.JobID
			}
		}
	}
	return nil
}
