package capacity

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
)

// GPU health keys (P is the prefix):
//
//	P:gpu-health  hash    "<node ID>/<GPU index>" → GPUHealth JSON
//	P:gpu-events  stream  {event: GPUEvent JSON}, capped at GPUEventsMaxLen
//
// A GPU's healthy flag and flakiness live in its node's inventory (P:nodes),
// where placement reads them; the record keeps the history behind them.

// GPUEventsMaxLen caps the GPU event stream (approximately: XADD MAXLEN ~).
const GPUEventsMaxLen = 10000

// gpuHealthAttempts bounds the compare-and-set retries of one update.
const gpuHealthAttempts = 20

// FenceGPUs marks e.GPUs of e.Node unhealthy, so placement gives them no
// new work, records e as their last fault and in the event stream, and
// counts a fence towards their flakiness (a GPU already fenced is not
// counted again). It returns the updated records. ErrNotFound: the node
// is not registered.
func (v *View) FenceGPUs(ctx context.Context, e gangway.GPUEvent) ([]gangway.GPUHealth, error) {
	return v.updateGPUs(ctx, e.Node, e.GPUs, &e, e.At, func(g *gangway.GPU, h *gangway.GPUHealth) {
		if h.Healthy {
			h.Score = h.Flakiness(e.At) + 1
			h.ScoreAt = e.At
			h.Fences++
			h.FencedAt = e.At
		}
		h.Healthy, h.Reason = false, e.Meaning
		ev := e
		h.LastFault = &ev
	})
}

// UnfenceGPUs marks gpus of nodeID healthy again (the GPU was reset or the
// node rebooted): placement may use them; their flakiness stays.
func (v *View) UnfenceGPUs(ctx context.Context, nodeID string, gpus []int, now time.Time) ([]gangway.GPUHealth, error) {
	return v.updateGPUs(ctx, nodeID, gpus, nil, now, func(g *gangway.GPU, h *gangway.GPUHealth) {
		h.Healthy, h.Reason = true, ""
	})
}

// RecordGPUEvent appends e to the GPU event stream. A fault (e.Blame set)
// also becomes the last fault of e.GPUs; their health does not change.
func (v *View) RecordGPUEvent(ctx context.Context, e gangway.GPUEvent) error {
	gpus := e.GPUs
	if !e.Fault() {
		gpus = nil
	}
	_, err := v.updateGPUs(ctx, e.Node, gpus, &e, e.At, func(g *gangway.GPU, h *gangway.GPUHealth) {
		ev := e
		h.LastFault = &ev
	})
	return err
}

// GPUHealth returns the health records of nodeID's GPUs, by GPU index; a
// GPU that never had a record is absent.
func (v *View) GPUHealth(ctx context.Context, nodeID string) (map[int]gangway.GPUHealth, error) {
	all, err := v.readGPUHealth(ctx, nodeID+"/")
	if err != nil {
		return nil, fmt.Errorf("gpu health %s: %w", nodeID, err)
	}
	return all[nodeID], nil
}

// AllGPUHealth returns every health record, by node and GPU index.
func (v *View) AllGPUHealth(ctx context.Context) (map[string]map[int]gangway.GPUHealth, error) {
	all, err := v.readGPUHealth(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("gpu health: %w", err)
	}
	return all, nil
}

func (v *View) readGPUHealth(ctx context.Context, fieldPrefix string) (map[string]map[int]gangway.GPUHealth, error) {
	records, _ := v.gpuHealthKeys()
	raw, err := v.rdb.HGetAll(ctx, records).Result()
	if err != nil {
		return nil, err
	}
	out := map[string]map[int]gangway.GPUHealth{}
	for f, s := range raw {
		if !strings.HasPrefix(f, fieldPrefix) {
			continue
		}
		var h gangway.GPUHealth
		if err := json.Unmarshal([]byte(s), &h); err != nil {
			return nil, fmt.Errorf("decode %s: %w", f, err)
		}
		if out[h.Node] == nil {
			out[h.Node] = map[int]gangway.GPUHealth{}
		}
		out[h.Node][h.GPU] = h
	}
	return out, nil
}

// GPUEvents returns up to count of the newest GPU events, newest first.
func (v *View) GPUEvents(ctx context.Context, count int64) ([]gangway.GPUEvent, error) {
	_, events := v.gpuHealthKeys()
	msgs, err := v.rdb.XRevRangeN(ctx, events, "+", "-", count).Result()
	if err != nil {
		return nil, fmt.Errorf("gpu events: %w", err)
	}
	out := make([]gangway.GPUEvent, 0, len(msgs))
	for _, m := range msgs {
		s, _ := m.Values["event"].(string)
		var e gangway.GPUEvent
		if err := json.Unmarshal([]byte(s), &e); err != nil {
			return nil, fmt.Errorf("gpu events: decode %s: %w", m.ID, err)
		}
		e.ID = m.ID
		out = append(out, e)
	}
	return out, nil
}

//go:embed scripts/gpu_health.lua
var gpuHealthLua string

var gpuHealthScript = redis.NewScript(gpuHealthLua)

// gpuHealthKeys are the record hash and the event stream, under the view's
// prefix.
func (v *View) gpuHealthKeys() (records, events string) {
	prefix := strings.TrimSuffix(v.k.nodes, ":nodes")
	return prefix + ":gpu-health", prefix + ":gpu-events"
}

// errGPUHealthRace: the node or a record changed between read and write.
var errGPUHealthRace = errors.New("changed while updating")

// updateGPUs applies change to gpus of nodeID (their inventory entry and
// their health record) and appends event (when not nil), atomically:
// read, change in Go, and write only if nothing changed meanwhile, else
// again.
func (v *View) updateGPUs(ctx context.Context, nodeID string, gpus []int, event *gangway.GPUEvent, now time.Time,
	change func(*gangway.GPU, *gangway.GPUHealth)) ([]gangway.GPUHealth, error) {
	var err error
	for range gpuHealthAttempts {
		var out []gangway.GPUHealth
		out, err = v.tryUpdateGPUs(ctx, nodeID, gpus, event, now, change)
		if !errors.Is(err, errGPUHealthRace) {
			return out, err
		}
	}
	return nil, fmt.Errorf("gpu health %s: %w %d times; giving up", nodeID, err, gpuHealthAttempts)
}

func (v *View) tryUpdateGPUs(ctx context.Context, nodeID string, gpus []int, event *gangway.GPUEvent, now time.Time,
	change func(*gangway.GPU, *gangway.GPUHealth)) ([]gangway.GPUHealth, error) {
	records, events := v.gpuHealthKeys()
	oldNode, err := v.rdb.HGet(ctx, v.k.nodes, nodeID).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("gpu health %s: %w", nodeID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("gpu health %s: %w", nodeID, err)
	}
	var node gangway.Node
	if err := json.Unmarshal([]byte(oldNode), &node); err != nil {
		return nil, fmt.Errorf("gpu health %s: decode node: %w", nodeID, err)
	}
	gpus = slices.Compact(slices.Sorted(slices.Values(gpus)))
	fields := make([]string, len(gpus))
	for i, g := range gpus {
		if g < 0 || g >= len(node.GPUs) || node.GPUs[g].Index != g {
			return nil, fmt.Errorf("gpu health %s: node has no GPU %d (%d GPUs)", nodeID, g, len(node.GPUs))
		}
		fields[i] = gpuField(nodeID, g)
	}
	var oldRecs []any
	if len(fields) > 0 {
		if oldRecs, err = v.rdb.HMGet(ctx, records, fields...).Result(); err != nil {
			return nil, fmt.Errorf("gpu health %s: %w", nodeID, err)
		}
	}
	args := []any{nodeID, oldNode, "", GPUEventsMaxLen, ""}
	out := make([]gangway.GPUHealth, len(gpus))
	for i, g := range gpus {
		gpu := &node.GPUs[g]
		old, _ := oldRecs[i].(string)
		h := gangway.GPUHealth{Node: nodeID, GPU: g, UUID: gpu.UUID, Healthy: gpu.Healthy}
		if old != "" {
			var prev gangway.GPUHealth
			if err := json.Unmarshal([]byte(old), &prev); err != nil {
				return nil, fmt.Errorf("gpu health %s: decode record of GPU %d: %w", nodeID, g, err)
			}
			// A record of another GPU (the card was replaced) is history
			// of that GPU, not this one.
			if prev.UUID == gpu.UUID {
				h = prev
			}
		}
		change(gpu, &h)
		gpu.Healthy, gpu.Flakiness = h.Healthy, round3(h.Flakiness(now))
		rec, err := json.Marshal(h)
		if err != nil {
			return nil, fmt.Errorf("gpu health %s: %w", nodeID, err)
		}
		out[i] = h
		args = append(args, fields[i], old, string(rec))
	}
	newNode, err := json.Marshal(node)
	if err != nil {
		return nil, fmt.Errorf("gpu health %s: %w", nodeID, err)
	}
	args[2] = string(newNode)
	if len(gpus) == 0 {
		args[2] = oldNode // nothing to change in the inventory
	}
	if event != nil {
		e := *event
		e.ID = ""
		data, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("gpu health %s: %w", nodeID, err)
		}
		args[4] = string(data)
	}
	res, err := gpuHealthScript.Run(ctx, v.rdb, []string{v.k.nodes, records, events, v.k.nodeChanges, v.k.rev}, args...).Int()
	if err != nil {
		return nil, fmt.Errorf("gpu health %s: %w", nodeID, err)
	}
	if res == 0 {
		return nil, errGPUHealthRace
	}
	return out, nil
}

// round3 keeps flakiness to three decimals, so the inventory does not
// change with every nanosecond of decay.
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
