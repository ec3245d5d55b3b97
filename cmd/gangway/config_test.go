package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gangwayhq/gangway/internal/config"
)

// clearEnv unsets every variable load and the flags read, for the length of
// the test, so the developer's own GANGWAY_* settings cannot leak in.
const exampleConfig = "../../deploy/gangway.example.yaml"

func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range append(config.EnvNames(), config.CLIEnvNames...) {
		t.Setenv(k, "") // restores the old value when the test ends
		os.Unsetenv(k)
	}
}

// newTestCmd returns gangway's subcommand name (server or agent), wired the
// way newRootCmd wires it, and the app its flags are bound to. newRootCmd
// keeps its app to itself, and load must be handed the very config.Config the
// flags point at; TestTestCmdMatchesRoot keeps the two wirings alike.
func newTestCmd(t *testing.T, name string) (*cobra.Command, *app) {
	t.Helper()
	a := &app{cfg: config.Default()}
	root := &cobra.Command{Use: "gangway"}
	config.BindGlobalFlags(root.PersistentFlags(), &a.cfg, &a.configFile)
	root.AddCommand(newServerCmd(a), newAgentCmd(a))
	cmd, _, err := root.Find([]string{name})
	if err != nil || cmd == root {
		t.Fatalf("no %s command: %v", name, err)
	}
	return cmd, a
}

// flagDefaults lists every flag cmd takes, its own and inherited, with its
// default and usage.
func flagDefaults(t *testing.T, cmd *cobra.Command) []string {
	t.Helper()
	if err := cmd.ParseFlags(nil); err != nil { // merges the inherited flags in
		t.Fatal(err)
	}
	var out []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		out = append(out, f.Name+"="+f.DefValue+": "+f.Usage)
	})
	return out
}

func TestTestCmdMatchesRoot(t *testing.T) {
	clearEnv(t)
	for _, name := range []string{"server", "agent"} {
		t.Run(name, func(t *testing.T) {
			fromRoot, _, err := newRootCmd().Find([]string{name})
			if err != nil {
				t.Fatal(err)
			}
			fromTest, _ := newTestCmd(t, name)
			if diff := cmp.Diff(flagDefaults(t, fromRoot), flagDefaults(t, fromTest)); diff != "" {
				t.Errorf("newTestCmd wires %s differently from newRootCmd (-root +test):\n%s", name, diff)
			}
		})
	}
}

func TestExampleConfigLoadsAndValidates(t *testing.T) {
	tests := map[string]struct {
		command       string
		args          []string
		server, agent bool
		// The example sets each field it sets to its default, so what it
		// loads is config.Default() plus the fields it must give.
		wantChanges func(*config.Config)
	}{
		"server": {command: "server", server: true},
		"agent": {
			command: "agent",
			// nodeId defaults to the hostname, which need not be a DNS label
			// on the machine running the test.
			args:        []string{"--node-id", "node-1"},
			agent:       true,
			wantChanges: func(c *config.Config) { c.Agent.NodeID = "node-1" },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			cmd, a := newTestCmd(t, tc.command)
			if err := cmd.ParseFlags(append(tc.args, "--config", exampleConfig)); err != nil {
				t.Fatal(err)
			}
			if err := config.Load(cmd.Flags(), &a.cfg, a.configFile); err != nil {
				t.Fatalf("load %s: %v", exampleConfig, err)
			}
			want := config.Default()
			if tc.wantChanges != nil {
				tc.wantChanges(&want)
			}
			if diff := cmp.Diff(want, a.cfg); diff != "" {
				t.Errorf("example config differs from the defaults it documents (-want +got):\n%s", diff)
			}
			if err := a.cfg.Validate(tc.server, tc.agent); err != nil {
				t.Errorf("example config does not validate for %s:\n%v", tc.command, err)
			}
		})
	}
}

func TestLoadPrecedence(t *testing.T) {
	const file = `
temporal:
  address: file:7233
  namespace: file-ns
log:
  format: json
server:
  dispatchInterval: 1s
  leaseTTL: 7s
agent:
  pool: file-pool
  fakeGPUs: 4xA100
`
	tests := map[string]struct {
		command string // default server
		// file is written to a temporary file named by --config, or by
		// GANGWAY_CONFIG when configEnv is set; "" means no file.
		file        string
		configEnv   bool
		env         map[string]string
		args        []string
		wantChanges func(*config.Config) // applied to config.Default()
	}{
		"defaults alone": {},
		"file over defaults": {
			file: file,
			wantChanges: func(c *config.Config) {
				c.Temporal = config.TemporalConfig{Address: "file:7233", Namespace: "file-ns"}
				c.Log.Format = "json"
				c.Server.DispatchInterval.Duration = time.Second
				c.Server.LeaseTTL.Duration = 7 * time.Second
				c.Agent.Pool = "file-pool"
				c.Agent.FakeGPUs = "4xA100"
			},
		},
		"GANGWAY_CONFIG names the file": {
			file: "temporal:\n  address: file:7233\n", configEnv: true,
			wantChanges: func(c *config.Config) { c.Temporal.Address = "file:7233" },
		},
		"--config over GANGWAY_CONFIG": {
			file:        "temporal:\n  address: file:7233\n",
			env:         map[string]string{"GANGWAY_CONFIG": "/nonexistent/gangway.yaml"},
			wantChanges: func(c *config.Config) { c.Temporal.Address = "file:7233" },
		},
		"env over file": {
			file: file,
			env: map[string]string{
				"GANGWAY_TEMPORAL_ADDRESS": "env:7233",
				"GANGWAY_NAMESPACE":        "env-ns",
				"GANGWAY_REDIS_URL":        "redis://env:6379/1",
				"GANGWAY_LOG_LEVEL":        "debug",
			},
			wantChanges: func(c *config.Config) {
				c.Temporal = config.TemporalConfig{Address: "env:7233", Namespace: "env-ns"}
				c.Redis.URL = "redis://env:6379/1"
				c.Log = config.LogConfig{Level: "debug", Format: "json"}
				c.Server.DispatchInterval.Duration = time.Second
				c.Server.LeaseTTL.Duration = 7 * time.Second
				c.Agent.Pool = "file-pool"
				c.Agent.FakeGPUs = "4xA100"
			},
		},
		"flags over env over file": {
			file: file,
			env: map[string]string{
				"GANGWAY_TEMPORAL_ADDRESS": "env:7233",
				"GANGWAY_NAMESPACE":        "env-ns",
			},
			args: []string{"--temporal-address", "flag:7233", "--lease-ttl", "9s", "--metrics-addr", ""},
			wantChanges: func(c *config.Config) {
				// namespace: env, no flag; dispatchInterval: file, no flag
				// (an unset flag must not put its default back).
				c.Temporal = config.TemporalConfig{Address: "flag:7233", Namespace: "env-ns"}
				c.Log.Format = "json"
				c.Server.DispatchInterval.Duration = time.Second
				c.Server.LeaseTTL.Duration = 9 * time.Second
				c.Server.MetricsAddr = ""
				c.Agent.Pool = "file-pool"
				c.Agent.FakeGPUs = "4xA100"
			},
		},
		"agent flags over file": {
			command: "agent",
			file:    file,
			args:    []string{"--pool", "flag-pool", "--heartbeat-interval", "3s"},
			wantChanges: func(c *config.Config) {
				c.Temporal = config.TemporalConfig{Address: "file:7233", Namespace: "file-ns"}
				c.Log.Format = "json"
				c.Server.DispatchInterval.Duration = time.Second
				c.Server.LeaseTTL.Duration = 7 * time.Second
				c.Agent.Pool = "flag-pool"
				c.Agent.FakeGPUs = "4xA100"
				c.Agent.HeartbeatInterval.Duration = 3 * time.Second
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			args := tc.args
			if tc.file != "" {
				path := filepath.Join(t.TempDir(), "gangway.yaml")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				if tc.configEnv {
					t.Setenv("GANGWAY_CONFIG", path)
				} else {
					args = append(args, "--config", path)
				}
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			command := tc.command
			if command == "" {
				command = "server"
			}
			cmd, a := newTestCmd(t, command) // after the env: --config defaults to GANGWAY_CONFIG
			if err := cmd.ParseFlags(args); err != nil {
				t.Fatal(err)
			}
			if err := config.Load(cmd.Flags(), &a.cfg, a.configFile); err != nil {
				t.Fatal(err)
			}
			want := config.Default()
			if tc.wantChanges != nil {
				tc.wantChanges(&want)
			}
			if diff := cmp.Diff(want, a.cfg); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadRejectsUnknownFields(t *testing.T) {
	tests := map[string]struct {
		file         string
		wantErrParts []string
	}{
		"misspelt field": {
			file:         "server:\n  leaseTtl: 5s\n",
			wantErrParts: []string{"line 2", "field leaseTtl not found"},
		},
		"unknown section": {
			file:         "log:\n  level: info\ntemporl:\n  address: x:1\n",
			wantErrParts: []string{"line 3", "field temporl not found"},
		},
		"field in the wrong section": {
			file:         "server:\n  fakeGPUs: 8xH100\n",
			wantErrParts: []string{"line 2", "field fakeGPUs not found"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			path := filepath.Join(t.TempDir(), "gangway.yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd, a := newTestCmd(t, "server")
			if err := cmd.ParseFlags([]string{"--config", path}); err != nil {
				t.Fatal(err)
			}
			err := config.Load(cmd.Flags(), &a.cfg, a.configFile)
			if err == nil {
				t.Fatalf("load accepted:\n%s", tc.file)
			}
			for _, part := range append(tc.wantErrParts, path) {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not contain %q", err, part)
				}
			}
		})
	}
}
