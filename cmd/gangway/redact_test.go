package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gangwayhq/gangway/internal/config"
	"github.com/gangwayhq/gangway/internal/devstack"
)

// A Redis password never reaches an error: not when Redis does not answer
// (a closed port), not when the URL is malformed.
func TestRedisErrorsHidePassword(t *testing.T) {
	port, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	closed := fmt.Sprintf("redis://:s3cret-pw@127.0.0.1:%d/0", port)

	out, err := runGangway(t, "server", "--redis-url", closed)
	if err == nil {
		t.Fatalf("server with Redis down succeeded:\n%s", out)
	}
	for _, text := range []string{err.Error(), out} {
		if strings.Contains(text, "s3cret") || !strings.Contains(err.Error(), "redis") {
			t.Errorf("gangway server: %q (output %q): want a redis error without the password", err, out)
		}
	}

	for _, url := range []string{closed, "redis://:s3cret%zz-pw@127.0.0.1:6379/0", "redis://:s3cret/-pw@127.0.0.1:6379/0"} {
		_, err := config.RedisConfig{URL: url}.Dial(context.Background())
		if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "-pw") {
			t.Errorf("RedisConfig.Dial(%q) = %v, want an error without the password", url, err)
		}
	}
}
