package fullstack

import (
	"context"
	"fmt"
	"time"
)

// supervise starts redis-server or the Temporal dev server again when its
// process exits, until ctx ends (Close ends it before it stops them).
func (s *Stack) supervise(ctx context.Context, tell func(string)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.Redis.Done():
			s.restart(ctx, tell, "redis-server", "empty; the view rebuilds itself from the workflows and agents", s.Redis.Restart)
		case <-s.Temporal.Done():
			s.restart(ctx, tell, "the Temporal dev server", "on the same database file", s.Temporal.Restart)
		}
	}
}

// restartEvery is how long supervise waits between tries to start a server
// again.
const restartEvery = time.Second

func (s *Stack) restart(ctx context.Context, tell func(string), what, how string, start func(context.Context) error) {
	tell(fmt.Sprintf("%s exited; starting it again, %s", what, how))
	for ctx.Err() == nil {
		err := start(ctx)
		if err == nil {
			tell(what + " is back")
			return
		}
		s.log.Warn("restart failed; trying again", "server", what, "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(restartEvery):
		}
	}
}
