package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
)

// validState reports whether SetNodeState accepts state.
func validState(state string) bool {
	switch state {
	case gangway.NodeReady, gangway.NodeCordoned, gangway.NodeLost:
		return true
	}
	return false
}

// RegisterNode upserts a node's inventory and records a heartbeat (at the
// Redis server's time, as Heartbeat).
// A new node, or one marked lost, becomes ready; a cordoned node stays
// cordoned, so an agent restart does not undo an operator's cordon.
func (v *View) RegisterNode(ctx context.Context, n gangway.Node) error {
	if n.ID == "" {
		return errors.New("register node: empty node id")
	}
	inv, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("register node %s: %w", n.ID, err)
	}
	keys := []string{v.k.nodes, v.k.nodeState, v.k.heartbeat, v.k.nodeChanges, v.k.rev}
	if err := registerScript.Run(ctx, v.rdb, keys, n.ID, inv).Err(); err != nil {
		return fmt.Errorf("register node %s: %w", n.ID, err)
	}
	v.announce(ctx, EventNode)
	return nil
}

// Heartbeat records that the node's agent is alive, at the Redis server's
// time: liveness is judged on that one clock (Snapshot.Now, NodeStatus's
// HeartbeatAge), never on the agent's. It carries the tasks the agent runs
// (rebuild.go). It returns ErrNotFound if the node never registered (the
// agent should register). It reads the inventory and writes only the
// heartbeats and the node's tasks: what an agent's Redis user may do
// (docs/security.md). A node removed between the two steps keeps a
// heartbeat without an inventory, which nothing reads.
func (v *View) Heartbeat(ctx context.Context, nodeID string, tasks []Task) error {
	raw, err := encodeTasks(tasks)
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", nodeID, err)
	}
	known, err := v.rdb.HExists(ctx, v.k.nodes, nodeID).Result()
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", nodeID, err)
	}
	if !known {
		return fmt.Errorf("heartbeat %s: %w", nodeID, ErrNotFound)
	}
	if err := heartbeatScript.Run(ctx, v.rdb, []string{v.k.heartbeat, v.k.nodeTasks}, nodeID, raw).Err(); err != nil {
		return fmt.Errorf("heartbeat %s: %w", nodeID, err)
	}
	return nil
}

// LastHeartbeat returns when the node last heartbeated, and whether it is
// registered at all.
func (v *View) LastHeartbeat(ctx context.Context, nodeID string) (time.Time, bool, error) {
	known, err := v.rdb.HExists(ctx, v.k.nodes, nodeID).Result()
	if err != nil || !known {
		return time.Time{}, false, err
	}
	ms, err := v.rdb.HGet(ctx, v.k.heartbeat, nodeID).Int64()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, true, nil
	}
	if err != nil {
		return time.Time{}, true, fmt.Errorf("last heartbeat of %s: %w", nodeID, err)
	}
	return time.UnixMilli(ms), true, nil
}

// SetNodeState cordons (gangway.NodeCordoned), uncordons (gangway.NodeReady)
// or marks a node lost (gangway.NodeLost). Jobs already on the node keep
// their GPUs; only new commits need a ready node.
func (v *View) SetNodeState(ctx context.Context, nodeID, state string) error {
	if !validState(state) {
		return fmt.Errorf("set node %s state: invalid state %q (want %s, %s or %s)",
			nodeID, state, gangway.NodeReady, gangway.NodeCordoned, gangway.NodeLost)
	}
	keys := []string{v.k.nodes, v.k.nodeState, v.k.nodeChanges, v.k.rev}
	ok, err := setStateScript.Run(ctx, v.rdb, keys, nodeID, state).Int()
	if err != nil {
		return fmt.Errorf("set node %s state: %w", nodeID, err)
	}
	if ok == 0 {
		return fmt.Errorf("set node %s state: %w", nodeID, ErrNotFound)
	}
	v.announce(ctx, EventNode)
	return nil
}

// ForgetHeartbeat makes a node look silent until its next heartbeat: a job
// found the node lost (its task stopped heartbeating), so no new work goes
// there while a live agent's next heartbeat, which only moves time forward,
// restores it at once. An unknown node is not an error.
func (v *View) ForgetHeartbeat(ctx context.Context, nodeID string) error {
	if err := forgetHeartbeatScript.Run(ctx, v.rdb, []string{v.k.nodes, v.k.heartbeat}, nodeID).Err(); err != nil {
		return fmt.Errorf("forget heartbeat of %s: %w", nodeID, err)
	}
	return nil
}

// RemoveNode drops a node from the view (a terminated cloud instance, a
// node an admin removes). It returns ErrNodeBusy while a job still holds
// one of its GPUs, and ErrNotFound if the node is unknown.
func (v *View) RemoveNode(ctx context.Context, nodeID string) error {
	keys := []string{v.k.nodes, v.k.nodeState, v.k.heartbeat, v.k.gpus, v.k.nodeChanges, v.k.shares, v.k.rev, v.k.nodeTasks}
	res, err := removeNodeScript.Run(ctx, v.rdb, keys, nodeID).Int()
	if err != nil {
		return fmt.Errorf("remove node %s: %w", nodeID, err)
	}
	switch res {
	case 0:
		return fmt.Errorf("remove node %s: %w", nodeID, ErrNotFound)
	case -1:
		return fmt.Errorf("remove node %s: %w", nodeID, ErrNodeBusy)
	}
	v.announce(ctx, EventNode)
	return nil
}

// Ping checks that Redis answers (a readiness probe).
func (v *View) Ping(ctx context.Context) error { return v.rdb.Ping(ctx).Err() }

// Nodes returns every registered node with its state, heartbeat and
// allocations, read at one instant, sorted by ID. A node whose last
// heartbeat is older than Options.NodeTTL on the Redis server's clock is
// NodeLost, whatever state it was left in: its agent is silent.
func (v *View) Nodes(ctx context.Context) ([]gangway.NodeStatus, error) {
	st, err := v.read(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	for i := range st.Nodes {
		if st.Nodes[i].HeartbeatAge.Duration > v.nodeTTL {
			st.Nodes[i].State = gangway.NodeLost
		}
	}
	return st.Nodes, nil
}

// FleetNodes returns the inventory of every registered node, whatever its
// state, sorted by ID: what submit checks a job could ever fit on. Like a
// snapshot it fetches and decodes only the records that changed since the
// last call (its own read cache, nodecache.go): every submit asks, and at a
// thousand nodes decoding them all was most of a submit's cost. As in a
// snapshot, the GPU slices are shared with the cache: read-only.
func (v *View) FleetNodes(ctx context.Context) ([]gangway.Node, error) {
	v.fleet.mu.Lock()
	defer v.fleet.mu.Unlock()
	nodes, err := v.fleetOnce(ctx)
	if errors.Is(err, errCacheMiss) {
		nodes, err = v.fleetOnce(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("fleet nodes: %w", err)
	}
	return nodes, nil
}

func (v *View) fleetOnce(ctx context.Context) ([]gangway.Node, error) {
	c := &v.fleet
	gen, at, witness := v.seen.get()
	res, err := readScript.Run(ctx, v.rdb, v.readKeys(), "nodes", c.epoch, c.rev, "", "", "", gen, at, witness).Slice()
	if err != nil {
		return nil, err
	}
	if len(res) != 7 {
		return nil, fmt.Errorf("unexpected script reply of %d items", len(res))
	}
	epoch, _ := res[1].(string)
	rev, _ := res[2].(int64)
	whole, _ := res[3].(int64)
	count, _ := res[4].(int64)
	changed, err := changeList(res[5])
	if err != nil {
		return nil, err
	}
	witness, _ = res[6].(string)
	v.seen.advance(epoch, rev, witness)
	return c.mergeNodes(epoch, rev, changed, whole == 1, int(count))
}
