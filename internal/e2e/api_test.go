package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/api"
)

// apiTokens is the token file the stack's servers read.
func (s *stack) apiTokens() string { return filepath.Join(s.logDir, "api-tokens") }

// token makes an API token in the servers' token file.
func (s *stack) token(user string, teams []string, admin bool) string {
	s.t.Helper()
	tok, err := api.CreateToken(s.apiTokens(), user, teams, admin, time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

// startAPIServer starts a `gangway server` whose user API listens on a
// known port and returns the API's URL once it answers.
func (s *stack) startAPIServer(ctx context.Context, extra ...string) string {
	s.t.Helper()
	addr := freeAddr(s.t)
	s.startServer(append(extra, "--api-addr", addr)...)
	url := "http://" + addr
	waitFor(s.t, ctx, "the user API answers", func() bool {
		resp, err := http.Get(url + "/v1/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url
}

func jobIDs(list []client.Summary) []string {
	var out []string
	for _, j := range list {
		out = append(out, j.JobID)
	}
	return out
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
