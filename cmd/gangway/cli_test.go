package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runGangway runs the gangway command line args in-process and returns what
// it printed (stdout and stderr) and the error main would print.
func runGangway(t *testing.T, args ...string) (string, error) {
	t.Helper()
	clearEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

func TestHelp(t *testing.T) {
	root := newRootCmd()
	cmds := append([]*cobra.Command{root}, root.Commands()...)
	for _, cmd := range cmds {
		t.Run(cmd.Name(), func(t *testing.T) {
			args := []string{"--help"}
			if cmd != root {
				args = []string{cmd.Name(), "--help"}
			}
			out, err := runGangway(t, args...)
			if err != nil {
				t.Fatalf("gangway %s: %v", strings.Join(args, " "), err)
			}
			want := []string{cmd.UseLine()}
			visit := func(f *pflag.Flag) { want = append(want, "--"+f.Name) }
			cmd.LocalFlags().VisitAll(visit)
			cmd.InheritedFlags().VisitAll(visit)
			if len(want) < 2 {
				t.Fatalf("found no flags for %s", cmd.Name())
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("gangway %s does not mention %q:\n%s", strings.Join(args, " "), w, out)
				}
			}
		})
	}
}

func TestRejectedBeforeStarting(t *testing.T) {
	// Nothing listens here: a command that got as far as dialling would fail
	// with a connection error instead of the one it must give first.
	bogus := []string{"--temporal-address", "127.0.0.1:1", "--redis-url", "redis://127.0.0.1:1"}
	spec := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(spec, []byte("name: bad-job\ncommand: [train]\ngang:\n  replicas: 0\n  gpusPerReplica: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		args         []string
		wantErrParts []string
	}{
		"submit an invalid spec": {
			args:         []string{"submit", spec},
			wantErrParts: []string{spec, "team", "gang.replicas"},
		},
		"submit --output yaml": {
			args:         []string{"submit", spec, "--output", "yaml"},
			wantErrParts: []string{"--output", `"yaml"`},
		},
		"status --output yaml": {
			args:         []string{"status", "job-1", "-o", "yaml"},
			wantErrParts: []string{"--output", `"yaml"`},
		},
		"list --output yaml": {
			args:         []string{"list", "--output", "yaml"},
			wantErrParts: []string{"--output", `"yaml"`},
		},
		"nodes --output yaml": {
			args:         []string{"nodes", "--output", "yaml"},
			wantErrParts: []string{"--output", `"yaml"`},
		},
		"dev with nine GPUs per node": {
			args:         []string{"dev", "--nodes", "4x9:H100"},
			wantErrParts: []string{"--nodes", "4x9:H100", "GPUs per node"},
		},
		"dev with no GPU model": {
			args:         []string{"dev", "--nodes", "4x8"},
			wantErrParts: []string{"--nodes", "4x8"},
		},
		"server with a bad config": {
			args:         []string{"server", "--lease-ttl", "100ms"},
			wantErrParts: []string{"server.leaseTTL"},
		},
		"agent with bad fake GPUs": {
			args:         []string{"agent", "--node-id", "node-1", "--fake-gpus", "9xH100"},
			wantErrParts: []string{"agent.fakeGPUs"},
		},
		"demo-train with no steps": {
			args:         []string{"demo-train", "--steps", "0"},
			wantErrParts: []string{"--steps"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := runGangway(t, append(tc.args, bogus...)...)
			if err == nil {
				t.Fatalf("gangway %s succeeded:\n%s", strings.Join(tc.args, " "), out)
			}
			for _, part := range tc.wantErrParts {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not name %q", err, part)
				}
			}
			for _, dial := range []string{"127.0.0.1:1", "redis at", "temporal at"} {
				if strings.Contains(err.Error(), dial) {
					t.Errorf("error %q comes from connecting, not from checking the input", err)
				}
			}
			if out != "" {
				t.Errorf("printed before rejecting the input:\n%s", out)
			}
		})
	}
}

func TestDemoTrain(t *testing.T) {
	out, err := runGangway(t, "demo-train", "--steps", "3", "--step-time", "1ms")
	if err != nil {
		t.Fatalf("demo-train: %v\n%s", err, out)
	}
	var got []string
	for _, line := range strings.Split(out, "\n") {
		switch f := strings.Fields(line); {
		case len(f) >= 2 && f[0] == "step":
			got = append(got, f[0]+" "+f[1]) // the loss is not part of the contract
		case line == "demo-train: done":
			got = append(got, line)
		}
	}
	want := []string{"step 1/3", "step 2/3", "step 3/3", "demo-train: done"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("demo-train output (-want +got):\n%s\nfull output:\n%s", diff, out)
	}
}
