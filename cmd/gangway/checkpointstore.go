package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/gangwayhq/gangway/checkpoint"
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
