package main

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gangwayhq/gangway/placement/baselines"
)

const exampleConfig = "../../deploy/gangway.example.yaml"

// clearEnv unsets every variable load and the flags read, for the length of
// the test, so the developer's own GANGWAY_* settings cannot leak in.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range append(slices.Sorted(maps.Keys(envVars)), "GANGWAY_CONFIG") {
		t.Setenv(k, "") // restores the old value when the test ends
		os.Unsetenv(k)
	}
}

// newTestCmd returns gangway's subcommand name (server or agent), wired the
// way newRootCmd wires it, and the app its flags are bound to. newRootCmd
// keeps its app to itself, and load must be handed the very Config the
// flags point at; TestTestCmdMatchesRoot keeps the two wirings alike.
func newTestCmd(t *testing.T, name string) (*cobra.Command, *app) {
	t.Helper()
	a := &app{cfg: defaultConfig()}
	root := &cobra.Command{Use: "gangway"}
	bindGlobalFlags(root.PersistentFlags(), &a.cfg, &a.configFile)
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
		// loads is defaultConfig() plus the fields it must give.
		wantChanges func(*Config)
	}{
		"server": {command: "server", server: true},
		"agent": {
			command: "agent",
			// nodeId defaults to the hostname, which need not be a DNS label
			// on the machine running the test.
			args:        []string{"--node-id", "node-1"},
			agent:       true,
			wantChanges: func(c *Config) { c.Agent.NodeID = "node-1" },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			cmd, a := newTestCmd(t, tc.command)
			if err := cmd.ParseFlags(append(tc.args, "--config", exampleConfig)); err != nil {
				t.Fatal(err)
			}
			if err := load(cmd.Flags(), &a.cfg, a.configFile); err != nil {
				t.Fatalf("load %s: %v", exampleConfig, err)
			}
			want := defaultConfig()
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

// TestExampleConfigDocumentsEveryField checks that every field of Config
// appears in the example, set or commented out, under its section.
func TestExampleConfigDocumentsEveryField(t *testing.T) {
	data, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile(`^(\w+):\s*$`)
	field := regexp.MustCompile(`^\s+#?\s*(\w+):`)
	documented := map[string]bool{}
	current := ""
	for _, line := range strings.Split(string(data), "\n") {
		if m := section.FindStringSubmatch(line); m != nil {
			current = m[1]
		} else if m := field.FindStringSubmatch(line); m != nil && current != "" {
			documented[current+"."+m[1]] = true
		}
	}
	var missing []string
	for _, f := range yamlFields(reflect.TypeFor[Config](), "") {
		if !documented[f] {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s does not document %v", exampleConfig, missing)
	}
}

// yamlFields lists the dotted YAML names of the fields of Config's sections
// (t is Config, prefix ""), or of one section.
func yamlFields(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if prefix == "" {
			out = append(out, yamlFields(f.Type, name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
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
		wantChanges func(*Config) // applied to defaultConfig()
	}{
		"defaults alone": {},
		"file over defaults": {
			file: file,
			wantChanges: func(c *Config) {
				c.Temporal = TemporalConfig{Address: "file:7233", Namespace: "file-ns"}
				c.Log.Format = "json"
				c.Server.DispatchInterval.Duration = time.Second
				c.Server.LeaseTTL.Duration = 7 * time.Second
				c.Agent.Pool = "file-pool"
				c.Agent.FakeGPUs = "4xA100"
			},
		},
		"GANGWAY_CONFIG names the file": {
			file: "temporal:\n  address: file:7233\n", configEnv: true,
			wantChanges: func(c *Config) { c.Temporal.Address = "file:7233" },
		},
		"--config over GANGWAY_CONFIG": {
			file:        "temporal:\n  address: file:7233\n",
			env:         map[string]string{"GANGWAY_CONFIG": "/nonexistent/gangway.yaml"},
			wantChanges: func(c *Config) { c.Temporal.Address = "file:7233" },
		},
		"env over file": {
			file: file,
			env: map[string]string{
				"GANGWAY_TEMPORAL_ADDRESS": "env:7233",
				"GANGWAY_NAMESPACE":        "env-ns",
				"GANGWAY_REDIS_URL":        "redis://env:6379/1",
				"GANGWAY_LOG_LEVEL":        "debug",
			},
			wantChanges: func(c *Config) {
				c.Temporal = TemporalConfig{Address: "env:7233", Namespace: "env-ns"}
				c.Redis.URL = "redis://env:6379/1"
				c.Log = LogConfig{Level: "debug", Format: "json"}
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
			wantChanges: func(c *Config) {
				// namespace: env, no flag; dispatchInterval: file, no flag
				// (an unset flag must not put its default back).
				c.Temporal = TemporalConfig{Address: "flag:7233", Namespace: "env-ns"}
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
			wantChanges: func(c *Config) {
				c.Temporal = TemporalConfig{Address: "file:7233", Namespace: "file-ns"}
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
			if err := load(cmd.Flags(), &a.cfg, a.configFile); err != nil {
				t.Fatal(err)
			}
			want := defaultConfig()
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
			err := load(cmd.Flags(), &a.cfg, a.configFile)
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

func TestValidate(t *testing.T) {
	// valid is the default config plus what has no usable default: a node ID
	// that does not depend on the test machine's hostname, and fake GPUs.
	valid := func() Config {
		c := defaultConfig()
		c.Agent.NodeID, c.Agent.Addr, c.Agent.FakeGPUs = "node-1", "node-1", "8xH100"
		return c
	}
	tests := map[string]struct {
		change        func(*Config)
		server, agent bool
		wantErrs      []string // one line each, in order
	}{
		"valid for server and agent": {server: true, agent: true},
		"valid for the CLI":          {},
		"temporal address without port": {
			change:   func(c *Config) { c.Temporal.Address = "temporal" },
			wantErrs: []string{`temporal.address: want host:port, got "temporal"`},
		},
		"empty namespace": {
			change:   func(c *Config) { c.Temporal.Namespace = "" },
			wantErrs: []string{"temporal.namespace: must not be empty"},
		},
		"redis URL with another scheme": {
			change:   func(c *Config) { c.Redis.URL = "http://127.0.0.1:6379" },
			wantErrs: []string{"redis.url: redis: invalid URL scheme: http"},
		},
		"empty redis prefix": {
			change:   func(c *Config) { c.Redis.Prefix = "" },
			wantErrs: []string{"redis.prefix: must not be empty"},
		},
		"unknown log level": {
			change:   func(c *Config) { c.Log.Level = "verbose" },
			wantErrs: []string{`log.level: want debug, info, warn or error, got "verbose"`},
		},
		"unknown log format": {
			change:   func(c *Config) { c.Log.Format = "xml" },
			wantErrs: []string{`log.format: must be text or json, got "xml"`},
		},
		"zero dispatch interval": {
			change:   func(c *Config) { c.Server.DispatchInterval.Duration = 0 },
			server:   true,
			wantErrs: []string{"server.dispatchInterval: must be positive, got 0s"},
		},
		"lease TTL under twice the dispatch interval": {
			change:   func(c *Config) { c.Server.LeaseTTL.Duration = 800 * time.Millisecond },
			server:   true,
			wantErrs: []string{"server.leaseTTL: must be at least twice server.dispatchInterval (500ms), got 800ms"},
		},
		"unknown placement policy": {
			change:   func(c *Config) { c.Server.Placement.Policy = "magic" },
			server:   true,
			wantErrs: []string{`server.placement.policy: scorer "magic": unknown scorer; valid: ` + strings.Join(baselines.Names(), ", ")},
		},
		"negative reservations and a bad quota": {
			change: func(c *Config) {
				c.Server.Placement.Reservations = -1
				c.Server.Placement.Quotas = []QuotaConfig{{Team: "Nlp", Nominal: 8}}
			},
			server: true,
			wantErrs: []string{"server.placement.reservations: must not be negative, got -1",
				`server.placement.quotas[0].team: must be a team name (a DNS label), got "Nlp"`},
		},
		"lease TTL exactly twice the dispatch interval": {
			change: func(c *Config) { c.Server.LeaseTTL.Duration = time.Second },
			server: true,
		},
		"zero node TTL": {
			change:   func(c *Config) { c.Server.NodeTTL.Duration = 0 },
			server:   true,
			wantErrs: []string{"server.nodeTTL: must be positive, got 0s"},
		},
		"server fields are not checked for the agent": {
			change: func(c *Config) { c.Server.LeaseTTL.Duration = 0 },
			agent:  true,
		},
		"node ID with dots": {
			change:   func(c *Config) { c.Agent.NodeID = "gpu-1.example.com" },
			agent:    true,
			wantErrs: []string{`agent.nodeId: must be a DNS label (lowercase letters, digits, '-'), got "gpu-1.example.com"`},
		},
		"pool with capitals": {
			change:   func(c *Config) { c.Agent.Pool = "OnPrem" },
			agent:    true,
			wantErrs: []string{`agent.pool: must be a DNS label, got "OnPrem"`},
		},
		"empty data dir": {
			change:   func(c *Config) { c.Agent.DataDir = "" },
			agent:    true,
			wantErrs: []string{"agent.dataDir: must not be empty"},
		},
		"no fake GPUs: NVML's": {
			change: func(c *Config) { c.Agent.FakeGPUs = "" },
			agent:  true,
		},
		"no zombie grace": {
			change:   func(c *Config) { c.Agent.ZombieGrace.Duration = 0 },
			agent:    true,
			wantErrs: []string{"agent.zombieGrace: must be positive, got 0s"},
		},
		"fake GPUs backwards": {
			change:   func(c *Config) { c.Agent.FakeGPUs = "H100x8" },
			agent:    true,
			wantErrs: []string{`agent.fakeGPUs: want COUNTxMODEL such as 8xH100, got "H100x8"`},
		},
		"nine fake GPUs": {
			change:   func(c *Config) { c.Agent.FakeGPUs = "9xH100" },
			agent:    true,
			wantErrs: []string{`agent.fakeGPUs: want COUNTxMODEL such as 8xH100, got "9xH100"`},
		},
		"fake GPUs in node group syntax": {
			change:   func(c *Config) { c.Agent.FakeGPUs = "1x8:H100" },
			agent:    true,
			wantErrs: []string{`agent.fakeGPUs: want COUNTxMODEL such as 8xH100, got "1x8:H100"`},
		},
		"fake GPUs of a model with an x": {
			change: func(c *Config) { c.Agent.FakeGPUs = "4xRTX6000" },
			agent:  true,
		},
		"zero heartbeat interval": {
			change:   func(c *Config) { c.Agent.HeartbeatInterval.Duration = 0 },
			agent:    true,
			wantErrs: []string{"agent.heartbeatInterval: must be positive, got 0s"},
		},
		"agent fields are not checked for the server": {
			change: func(c *Config) { c.Agent.FakeGPUs = "" },
			server: true,
		},
		"every problem at once": {
			change: func(c *Config) {
				c.Temporal.Address = ""
				c.Log.Level = "loud"
				c.Server.NodeTTL.Duration = -time.Second
				c.Agent.SampleInterval.Duration = 0
			},
			server: true,
			agent:  true,
			wantErrs: []string{
				`temporal.address: want host:port, got ""`,
				`log.level: want debug, info, warn or error, got "loud"`,
				"server.nodeTTL: must be positive, got -1s",
				"agent.sampleInterval: must be positive, got 0s",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := valid()
			if tc.change != nil {
				tc.change(&c)
			}
			var got []string
			if err := c.Validate(tc.server, tc.agent); err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tc.wantErrs, got); diff != "" {
				t.Errorf("Validate(server=%t, agent=%t) (-want +got):\n%s", tc.server, tc.agent, diff)
			}
		})
	}
}

func TestParseFakeGPUs(t *testing.T) {
	type result struct {
		GPUs  int
		Model string
	}
	tests := map[string]struct {
		in      string
		want    result
		wantErr bool
	}{
		"eight H100":        {in: "8xH100", want: result{8, "H100"}},
		"model with an x":   {in: "4xRTX6000", want: result{4, "RTX6000"}},
		"no count":          {in: "H100", wantErr: true},
		"no model":          {in: "8x", wantErr: true},
		"too many GPUs":     {in: "9xH100", wantErr: true},
		"node group syntax": {in: "1x8:H100", wantErr: true},
		"two groups":        {in: "8xH100,4xA100", wantErr: true},
		"count after model": {in: "H100x8", wantErr: true},
		"empty":             {in: "", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gpus, model, err := parseFakeGPUs(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseFakeGPUs(%q) error = %v, want error %t", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, result{gpus, model}); diff != "" {
				t.Errorf("parseFakeGPUs(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
