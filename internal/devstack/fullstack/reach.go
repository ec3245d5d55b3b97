package fullstack

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gangwayhq/gangway/internal/api"
	"github.com/gangwayhq/gangway/internal/redact"
)

// AdminToken starts the user API's token file in dir with one admin token,
// for whoever runs the stack, and writes that token to admin.token beside
// it: the CLI finds it there through GANGWAY_TOKEN_FILE.
func AdminToken(dir string, now time.Time) (tokens, tokenFile string, err error) {
	tokens, tokenFile = filepath.Join(dir, "api-tokens"), filepath.Join(dir, "admin.token")
	token, err := api.CreateToken(tokens, "dev", nil, true, now)
	if err == nil {
		err = os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	}
	if err != nil {
		return "", "", fmt.Errorf("dev API token: %w", err)
	}
	return tokens, tokenFile, nil
}

// Until is a context that ends with ctx or as soon as the stack's server
// stops, whichever comes first.
func (s *Stack) Until(ctx context.Context) (context.Context, context.CancelFunc) {
	runCtx, stop := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.done:
			stop()
		case <-runCtx.Done():
		}
	}()
	return runCtx, stop
}

// WriteReach tells a person in another terminal how to reach the stack
// with the CLI (binDir first on PATH, the token file AdminToken wrote), its
// web views, metrics and servers.
func (s *Stack) WriteReach(out io.Writer, binDir, tokens, tokenFile string) {
	fmt.Fprintf(out, "\nThe stack is up. In another terminal, in the repository (examples/README.md says what each example shows):\n")
	fmt.Fprintf(out, "  export PATH=%s:$PATH GANGWAY_API=%s GANGWAY_TOKEN_FILE=%s\n", binDir, s.APIURL, tokenFile)
	fmt.Fprintf(out, "  gangway submit examples/single-gpu.yaml --wait\n  gangway list\n  gangway nodes\n  gangway cost\n")
	fmt.Fprintf(out, "The token in %s is an admin's; more: gangway token create --api-tokens %s --user U --teams T\n", tokenFile, tokens)
	if s.Temporal.UIURL != "" {
		fmt.Fprintf(out, "Temporal Web UI: %s\n", s.Temporal.UIURL)
	}
	fmt.Fprintf(out, "Web view:        %s (sign in with the token in %s)\n", s.WebURL, tokenFile)
	fmt.Fprintf(out, "Metrics:         http://%s/metrics\nRedis:           %s\nUsage ledger:    %s\nCtrl-C stops everything.\n",
		s.MetricsAddr, redact.URL(s.Redis.URL), redact.URL(s.LedgerDSN))
}
