package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/agent/notice"
)

// openCheckpointStore opens the store checkpoint.store names. A file://
// store's directory is created if it is missing, so the default works on
// a fresh node.
func openCheckpointStore(ctx context.Context, c CheckpointConfig) (checkpoint.Store, error) {
	if strings.HasPrefix(c.Store, "file://") {
		if u, err := url.Parse(c.Store); err == nil && u.Path != "" {
			if err := os.MkdirAll(u.Path, 0o755); err != nil {
				return nil, fmt.Errorf("checkpoint.store %q: %w", c.Store, err)
			}
		}
	}
	s, err := checkpoint.Open(ctx, c.Store, checkpoint.Options{Endpoint: c.S3Endpoint, UsePathStyle: c.S3PathStyle,
		Region: c.S3Region})
	if err != nil {
		return nil, fmt.Errorf("checkpoint.store: %w", err)
	}
	return s, nil
}

// startNoticeWatcher starts the cloud notice watcher agent.notices picks
// (auto probes both clouds' metadata services) and returns the channel its
// notices arrive on; nil when there is nothing to watch.
func startNoticeWatcher(ctx context.Context, kind string, log *slog.Logger) (<-chan agent.Notice, error) {
	o := notice.Options{Log: log.With("component", "notices")}
	var w notice.Watcher
	if kind == "auto" {
		w = notice.Detect(ctx, o)
	} else {
		var err error
		if w, err = notice.New(kind, o); err != nil {
			return nil, fmt.Errorf("agent.notices: %w", err)
		}
	}
	if w == nil {
		return nil, nil
	}
	ch := make(chan agent.Notice)
	go func() {
		log.Info("watching for cloud preemption notices", "cloud", w.Name())
		_ = w.Watch(ctx, ch) // returns when ctx ends
	}()
	return ch, nil
}
