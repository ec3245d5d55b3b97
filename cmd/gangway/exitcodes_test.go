package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	tclient "go.temporal.io/sdk/client"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// TestJobCommandErrors: the job commands fail (main exits 1 on any error)
// with a message that says what is wrong: an unknown job is `no job named
// "x"` whichever command asks; cancelling a job that has ended says how it
// ended and changes nothing; a YAML syntax error names its line and column.
// Real Temporal and Redis servers behind the user API, no worker: the
// finished job is one terminated before any worker ran it.
func TestJobCommandErrors(t *testing.T) {
	ts := devstacktest.Temporal(t)
	r := devstacktest.Redis(t)
	tc, err := tclient.Dial(tclient.Options{HostPort: ts.Addr, Namespace: ts.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	spec := gangway.JobSpec{Name: "finished", Team: "ml", Command: []string{"true"}, Gang: gangway.Gang{Replicas: 1, GPUsPerReplica: 1}}
	spec.Default()
	if err := jobs.New(tc).Start(t.Context(), spec, jobs.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tc.TerminateWorkflow(t.Context(), "finished", "", "test"); err != nil {
		t.Fatal(err)
	}
	url, token := startAPI(t, tc, capacity.New(redis.NewClient(&redis.Options{Addr: r.Addr}), capacity.Options{}), nil)
	conn := []string{"--api", url, "--token", token}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: a\nteam: b\ncommand: [python, train.py\ngang:\n  replicas: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"logs of an unknown job":       {args: []string{"logs", "nosuchjob"}, wantErr: `no job named "nosuchjob"`},
		"logs -f of an unknown job":    {args: []string{"logs", "-f", "nosuchjob"}, wantErr: `no job named "nosuchjob"`},
		"status of an unknown job":     {args: []string{"status", "nosuchjob"}, wantErr: `no job named "nosuchjob"`},
		"why of an unknown job":        {args: []string{"why", "nosuchjob", "-o", "json"}, wantErr: `no job named "nosuchjob"`},
		"cancel of an unknown job":     {args: []string{"cancel", "nosuchjob"}, wantErr: `no job named "nosuchjob"`},
		"cancel of an ended job":       {args: []string{"cancel", "finished"}, wantErr: "job finished has already ended (Failed); nothing to cancel"},
		"a YAML error on line 3":       {args: []string{"submit", bad}, wantErr: "invalid YAML at line 4, column 1: did not find expected ',' or ']'"},
		"status of an ended job":       {args: []string{"status", "finished"}},
		"status of an ended job, json": {args: []string{"status", "finished", "-o", "json"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := runGangway(t, append(tt.args, conn...)...)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("gangway %s: %v\n%s", strings.Join(tt.args, " "), err, out)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("gangway %s: error %v, want one with %q\n%s", strings.Join(tt.args, " "), err, tt.wantErr, out)
			}
			if strings.Contains(out, "cancel requested") {
				t.Errorf("output claims a cancel: %s", out)
			}
		})
	}
	out, err := runGangway(t, append([]string{"status", "finished", "-o", "json"}, conn...)...)
	if err != nil || !strings.Contains(out, `"waitTime": "0s"`) {
		t.Errorf("status JSON (err %v) lacks a duration string for waitTime:\n%s", err, out)
	}
}

// TestReplayHelpNamesEveryProtocol: `gangway replay --help` describes
// each of its subcommands.
func TestReplayHelpNamesEveryProtocol(t *testing.T) {
	cmd := newReplayCmd()
	for _, sub := range cmd.Commands() {
		if !strings.Contains(cmd.Long, "\n  "+sub.Name()+" ") {
			t.Errorf("replay's help does not describe %s:\n%s", sub.Name(), cmd.Long)
		}
	}
}
