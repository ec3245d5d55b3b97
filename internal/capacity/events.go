package capacity

import (
	"context"
)

// Changes that can let a waiting job start are announced on P:events
// (Redis pub/sub), so the dispatch leader runs a cycle at once instead of
// at its next tick: a job enqueued, GPUs released, a node registered,
// changed state or removed. Announcing is best-effort: a lost message only
// delays placement to the next tick, so a failed PUBLISH is not an error.

// Event kinds, the messages on P:events.
const (
	EventEnqueued = "enqueued"
	EventReleased = "released"
	EventNode     = "node"
)

// announce publishes one event.
func (v *View) announce(ctx context.Context, kind string) {
	_ = v.rdb.Publish(ctx, v.k.events, kind).Err()
}

// Changes returns a channel that receives a value soon after any event is
// announced, coalesced: several events before the reader takes one give
// one value. It closes when ctx is done. go-redis re-subscribes by itself
// after a lost connection; what is announced while it is down is missed.
func (v *View) Changes(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	sub := v.rdb.Subscribe(ctx, v.k.events)
	go func() {
		defer close(out)
		defer sub.Close()
		msgs := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-msgs:
				if !ok {
					return
				}
				select {
				case out <- struct{}{}:
				default: // one is pending already
				}
			}
		}
	}()
	return out
}
