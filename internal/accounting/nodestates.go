package accounting

import (
	"context"
	"fmt"
	"time"

	"github.com/gangwayhq/gangway"
)

// The ledger's database also keeps the nodes' admin state, which a person
// set and the Redis view must not lose with the rest of itself: a rebuilt
// view takes its cordons from here (internal/dispatch's rebuild).

// SetNodeState records node's admin state: gangway.NodeCordoned is kept,
// any other state (ready; lost is not an admin state) clears the record.
func (l *Ledger) SetNodeState(ctx context.Context, nodeID, state string) error {
	var err error
	if state == gangway.NodeCordoned {
		_, err = l.db.ExecContext(ctx, l.d.bind(`INSERT INTO node_states (node_id, state, updated_at_ns) VALUES (?, ?, ?)
			ON CONFLICT (node_id) DO UPDATE SET state = excluded.state, updated_at_ns = excluded.updated_at_ns`),
			nodeID, state, time.Now().UnixNano())
	} else {
		_, err = l.db.ExecContext(ctx, l.d.bind(`DELETE FROM node_states WHERE node_id = ?`), nodeID)
	}
	if err != nil {
		return fmt.Errorf("record node %s %s: %w", nodeID, state, err)
	}
	return nil
}

// NodeStates returns every recorded admin state, node → state.
func (l *Ledger) NodeStates(ctx context.Context) (map[string]string, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT node_id, state FROM node_states`)
	if err != nil {
		return nil, fmt.Errorf("node states: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, state string
		if err := rows.Scan(&id, &state); err != nil {
			return nil, fmt.Errorf("node states: %w", err)
		}
		out[id] = state
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("node states: %w", err)
	}
	return out, nil
}
