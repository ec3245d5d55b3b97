package config

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/gangwayhq/gangway/internal/redact"
)

// Dial connects to the Redis view and checks that it answers. Neither a
// connection error nor a malformed URL shows the URL's password.
func (c RedisConfig) Dial(ctx context.Context) (*redis.Client, error) {
	opts, err := redis.ParseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", redact.Error(err))
	}
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", redact.URL(c.URL), err)
	}
	return rdb, nil
}

// Dial connects to Temporal, logging the SDK's warnings and errors to log.
func (c TemporalConfig) Dial(ctx context.Context, log *slog.Logger) (tclient.Client, error) {
	t, err := tclient.DialContext(ctx, tclient.Options{HostPort: c.Address, Namespace: c.Namespace, Logger: TemporalLogger(log)})
	if err != nil {
		return nil, fmt.Errorf("temporal at %s: %w", c.Address, err)
	}
	return t, nil
}

// TemporalLogger is log for the Temporal SDK, which logs every poll and
// retry at info: only its warnings and errors pass.
func TemporalLogger(log *slog.Logger) tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(minLevel{log.Handler(), slog.LevelWarn}))
}

// minLevel drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(attrs), m.min}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{m.Handler.WithGroup(name), m.min}
}
