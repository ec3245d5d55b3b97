package notice

import (
	"context"

	"github.com/gangwayhq/gangway/internal/agent"
)

// Start starts the watcher kind names ("auto" probes both clouds'
// metadata services, as Detect does) and returns the channel its notices
// arrive on, for agent.Config.Notices; nil when there is nothing to watch.
// The watcher stops when ctx ends.
func Start(ctx context.Context, kind string, o Options) (<-chan agent.Notice, error) {
	o = o.withDefaults()
	var w Watcher
	if kind == "auto" {
		w = Detect(ctx, o)
	} else {
		var err error
		if w, err = New(kind, o); err != nil {
			return nil, err
		}
	}
	if w == nil {
		return nil, nil
	}
	ch := make(chan agent.Notice)
	go func() {
		o.Log.Info("watching for cloud preemption notices", "cloud", w.Name())
		_ = w.Watch(ctx, ch) // returns when ctx ends
	}()
	return ch, nil
}
