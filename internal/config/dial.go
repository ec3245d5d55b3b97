package config

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
)

// Dial connects to the Redis view (TLS and the ACL user as the config
// says) and checks that it answers. Neither a connection error nor a
// malformed URL shows the URL's password.
func (c RedisConfig) Dial(ctx context.Context) (redis.UniversalClient, error) {
	rt := c.Transport()
	rdb, err := rt.Client()
	if err != nil {
		return nil, err
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", rt.Describe(), err)
	}
	return rdb, nil
}

// Dial connects to Temporal (TLS, mutual TLS and the API key as the
// config says), logging the SDK's warnings and errors to log.
func (c TemporalConfig) Dial(ctx context.Context, log *slog.Logger) (tclient.Client, error) {
	tt := c.Transport()
	opts, err := tt.Options(tclient.Options{Logger: TemporalLogger(log)})
	if err == nil {
		var t tclient.Client
		if t, err = tclient.DialContext(ctx, opts); err == nil {
			return t, nil
		}
	}
	return nil, fmt.Errorf("temporal at %s: %w", tt.Describe(), err)
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
