package capacity

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
)

// The calls of a process that hosts many simulated nodes (internal/agent
// Host): registration and heartbeats in batches, so ten thousand nodes cost
// a few round trips per interval instead of one each.

// hostedBatch is how many nodes one script call or pipeline carries: big
// enough that 10,000 nodes take 20 calls, small enough that no single
// script holds Redis for more than a millisecond or two.
const hostedBatch = 500

var (
	//go:embed scripts/heartbeat_many.lua
	heartbeatManyLua    string
	heartbeatManyScript = redis.NewScript(heartbeatManyLua)
)

// RegisterNodes registers every node as RegisterNode does, pipelined in
// batches.
func (v *View) RegisterNodes(ctx context.Context, nodes []gangway.Node) error {
	keys := []string{v.k.nodes, v.k.nodeState, v.k.heartbeat, v.k.nodeChanges, v.k.rev}
	// Loaded first, so the pipelines' EVALSHAs find it.
	if err := registerScript.Load(ctx, v.rdb).Err(); err != nil {
		return fmt.Errorf("register nodes: %w", err)
	}
	for start := 0; start < len(nodes); start += hostedBatch {
		batch := nodes[start:min(start+hostedBatch, len(nodes))]
		pipe := v.rdb.Pipeline()
		for _, n := range batch {
			if n.ID == "" {
				return errors.New("register nodes: empty node id")
			}
			inv, err := json.Marshal(n)
			if err != nil {
				return fmt.Errorf("register node %s: %w", n.ID, err)
			}
			registerScript.EvalSha(ctx, pipe, keys, n.ID, inv)
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			for i, c := range cmds {
				if c.Err() != nil {
					return fmt.Errorf("register node %s: %w", batch[i].ID, c.Err())
				}
			}
			return fmt.Errorf("register nodes: %w", err)
		}
	}
	v.announce(ctx, EventNode)
	return nil
}

// NodeBeat is one hosted node's heartbeat: its ID and the tasks it runs.
type NodeBeat struct {
	ID    string
	Tasks []Task
}

// HeartbeatNodes records that the agent hosting the nodes is alive, as
// Heartbeat does for each (at the Redis server's time, with its tasks), in
// one script call per batch. It returns the IDs the view does not know
// (the host registers them again).
func (v *View) HeartbeatNodes(ctx context.Context, beats []NodeBeat) ([]string, error) {
	keys := []string{v.k.nodes, v.k.heartbeat, v.k.nodeTasks}
	var missing []string
	for start := 0; start < len(beats); start += hostedBatch {
		batch := beats[start:min(start+hostedBatch, len(beats))]
		args := make([]any, 0, 2*len(batch))
		for _, b := range batch {
			raw, err := encodeTasks(b.Tasks)
			if err != nil {
				return missing, fmt.Errorf("heartbeat %s: %w", b.ID, err)
			}
			args = append(args, b.ID, raw)
		}
		got, err := heartbeatManyScript.Run(ctx, v.rdb, keys, args...).StringSlice()
		if err != nil && !errors.Is(err, redis.Nil) {
			return missing, fmt.Errorf("heartbeat %d nodes: %w", len(batch), err)
		}
		missing = append(missing, got...)
	}
	return missing, nil
}
