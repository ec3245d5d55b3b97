package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
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

// TestAPIOnRealServers: through the user API of a real `gangway server`
// (Redis, Temporal, agents running real processes), team ml's user alice
// is refused what belongs to team vision — submitting as vision, reading
// the status and logs of vision's job, cancelling it, draining its node —
// and every call without a token; bob of vision and an admin are allowed
// theirs, the admin's drain moves vision's job. Each mutating call left
// one audit line, and no token is in any log. The last line counts the
// calls checked refused and allowed.
func TestAPIOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s.startAgent(agent.FakeNode("node-0", "onprem", "127.0.0.1", 8, "H100"), agent.Config{})
	tokens := map[string]string{
		"alice": s.token("alice", []string{"ml"}, false),
		"bob":   s.token("bob", []string{"vision"}, false),
		"root":  s.token("root", nil, true),
	}
	url := s.startAPIServer(ctx)
	as := func(user string) *client.Client {
		c, err := client.NewAPI(client.APIOptions{URL: url, Token: tokens[user], Poll: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice, bob, root, nobody := as("alice"), as("bob"), as("root"), as("")

	var refused, allowed, mutating int
	// allow and refuse count a call that must succeed or be refused with
	// the given sentinel and words.
	allow := func(what string, mut bool, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		allowed++
		if mut {
			mutating++
		}
	}
	refuse := func(what string, mut bool, err error, want error, words string) {
		t.Helper()
		if !errors.Is(err, want) || !strings.Contains(err.Error(), words) {
			t.Errorf("%s = %v, want %v saying %q", what, err, want, words)
		}
		refused++
		if mut {
			mutating++
		}
	}

	long := spec("vision-long", "vision", 1, 4, s.bin, 100000)
	_, err := bob.Submit(ctx, long, client.SubmitOptions{})
	allow("bob submits as vision", true, err)
	waitFor(t, ctx, "vision's job running", func() bool {
		var st client.JobStatus
		st, err = bob.Status(ctx, long.Name)
		return err == nil && st.Phase == gangway.PhaseRunning
	})
	allow("bob reads his job's status", false, err)
	waitFor(t, ctx, "vision's job's output", func() bool {
		var lines []gangway.LogLine
		lines, err = bob.Logs(ctx, long.Name, "", 0)
		return err == nil && len(lines) > 0
	})
	allow("bob reads his job's logs", false, err)

	sneaky := spec("sneaky", "vision", 1, 1, s.bin, 1)
	_, err = alice.Submit(ctx, sneaky, client.SubmitOptions{})
	refuse("alice submits as vision", true, err, client.ErrForbidden, "user alice is not in team vision")
	_, err = alice.Status(ctx, long.Name)
	refuse("alice reads vision's status", false, err, client.ErrForbidden, "user alice is not in team vision")
	_, err = alice.Logs(ctx, long.Name, "", 0)
	refuse("alice reads vision's logs", false, err, client.ErrForbidden, "user alice is not in team vision")
	err = alice.FollowLogs(ctx, long.Name, true, func(gangway.LogLine) {})
	refuse("alice follows vision's logs", false, err, client.ErrForbidden, "user alice is not in team vision")
	refuse("alice cancels vision's job", true, alice.Cancel(ctx, long.Name), client.ErrForbidden, "user alice is not in team vision")
	_, err = alice.Drain(ctx, "node-0")
	refuse("alice drains vision's node", true, err, client.ErrForbidden, "user alice is not an admin")
	_, err = nobody.List(ctx)
	refuse("a list without a token", false, err, client.ErrUnauthenticated, "token required")
	_, err = nobody.Submit(ctx, spec("anon", "ml", 1, 1, s.bin, 1), client.SubmitOptions{})
	refuse("a submit without a token", true, err, client.ErrUnauthenticated, "token required")
	refuse("a cancel without a token", true, nobody.Cancel(ctx, long.Name), client.ErrUnauthenticated, "token required")

	own := spec("ml-short", "ml", 1, 1, s.bin, 5)
	_, err = alice.Submit(ctx, own, client.SubmitOptions{})
	allow("alice submits as ml", true, err)
	res, err := alice.Result(ctx, own.Name)
	allow("alice waits for her job", false, err)
	if res.Phase != gangway.PhaseSucceeded {
		t.Errorf("alice's job ended %s: %s", res.Phase, res.Reason)
	}
	list, err := alice.List(ctx)
	allow("alice lists", false, err)
	if ids := jobIDs(list); !slices.Equal(ids, []string{own.Name}) {
		t.Errorf("alice lists %v, want her job alone", ids)
	}
	nodes, err := alice.Nodes(ctx)
	allow("alice lists nodes", false, err)
	if len(nodes) != 1 || slices.Contains(nodes[0].Jobs(), long.Name) {
		t.Errorf("alice's node list names vision's job: %+v", nodes)
	}

	asked, err := root.Drain(ctx, "node-0")
	allow("the admin drains the node", true, err)
	if !slices.Equal(asked, []string{long.Name}) {
		t.Errorf("drain asked %v, want [%s]", asked, long.Name)
	}
	allow("the admin waits for the drain", false, root.WaitDrained(ctx, "node-0", asked, 200*time.Millisecond, nil))
	allow("the admin uncordons", true, root.Uncordon(ctx, "node-0"))
	allow("bob cancels his job", true, bob.Cancel(ctx, long.Name))
	res, err = bob.Result(ctx, long.Name)
	allow("bob waits for the end", false, err)
	if res.Phase != gangway.PhaseCancelled {
		t.Errorf("vision's job ended %s, want Cancelled", res.Phase)
	}

	// The servers' logs: one audit line per mutating call, no token.
	s.stopAll()
	logs, _ := filepath.Glob(filepath.Join(s.logDir, "*.log"))
	audits := 0
	var refusal bool // alice's cancel, in full
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			if strings.Contains(line, "msg=audit") {
				audits++
				refusal = refusal || containsAll(line, "user=alice", "action=cancel", "target="+long.Name, "outcome=refused", "status=403")
			}
		}
		for user, tok := range tokens {
			if tok != "" && strings.Contains(string(data), tok) {
				t.Errorf("%s holds %s's token", filepath.Base(l), user)
			}
		}
	}
	if !refusal {
		t.Error("no audit line records alice's refused cancel of vision's job")
	}
	if audits != mutating {
		t.Errorf("%d audit lines, want one per mutating call: %d", audits, mutating)
	}
	fmt.Printf("api: refused=%d allowed=%d\n", refused, allowed)
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
