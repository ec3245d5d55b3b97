package redact

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"no user info":        {"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		"password":            {"redis://:s3cret@redis.example:6379/0", "redis://:xxxxx@redis.example:6379/0"},
		"user and password":   {"rediss://gangway:s3cret@redis.example:6380", "rediss://gangway:xxxxx@redis.example:6380"},
		"user only":           {"redis://gangway@redis.example", "redis://gangway@redis.example"},
		"bad escape":          {"redis://:s3%zcret@redis.example:6379", "redis://xxxxx@redis.example:6379"},
		"slash in password":   {"redis://:s3/cret@redis.example:6379", "redis://xxxxx@redis.example:6379"},
		"hash in password":    {"redis://u:1234#x@redis.example", "redis://xxxxx@redis.example"},
		"at sign in password": {"redis://:p@ss@redis.example", "redis://:xxxxx@redis.example"},
		"no scheme":           {"u:s3cret@host:6379", "xxxxx@host:6379"},
		"host and port":       {"127.0.0.1:7233", "127.0.0.1:7233"},
		"unparsable, no at":   {"redis://[::1", "redis://[::1"},
		"empty":               {"", ""},
		"https with password": {"https://key:s3cret@minio.example:9000", "https://key:xxxxx@minio.example:9000"},
		"control char, at":    {"redis://:s3\x7fcret@h", "redis://xxxxx@h"},
		"path holds the at":   {"s3://bucket/a@b", "s3://xxxxx@b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := URL(tc.in); got != tc.want {
				t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestError(t *testing.T) {
	for _, raw := range []string{"redis://:s3%zcret@h:6379", "redis://:s3/cret@h:6379", "redis://:s3cret@h:port"} {
		_, err := url.Parse(raw)
		if err == nil {
			t.Fatalf("url.Parse(%q) did not fail", raw)
		}
		wrapped := fmt.Errorf("redis url: %w", Error(err))
		got := wrapped.Error()
		if strings.Contains(got, "s3") || strings.Contains(got, "cret") || strings.Contains(got, "zc") {
			t.Errorf("Error(%q) = %q, still has the password", raw, got)
		}
		var ue *url.Error
		if !errors.As(wrapped, &ue) {
			t.Errorf("Error(%q) lost the *url.Error", raw)
		}
	}
	// Without user info the error is left as it is: it has no secret and
	// says what to fix.
	_, err := url.Parse("redis://h:port")
	if got, want := Error(err).Error(), `parse "redis://h:port": invalid port ":port" after host`; got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
	if Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
}
