package main

import (
	"context"
	"fmt"

	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/internal/config"
)

// openCheckpointStore opens the store checkpoint.store names. A file://
// store's directory is created if it is missing, so the default works on
// a fresh node.
func openCheckpointStore(ctx context.Context, c config.CheckpointConfig) (checkpoint.Store, error) {
	s, err := checkpoint.Open(ctx, c.Store, checkpoint.Options{Endpoint: c.S3Endpoint, UsePathStyle: c.S3PathStyle,
		Region: c.S3Region, CreateDir: true})
	if err != nil {
		return nil, fmt.Errorf("checkpoint.store: %w", err)
	}
	return s, nil
}
