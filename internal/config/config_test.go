package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gangwayhq/gangway/internal/agent"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

const exampleConfig = "../../deploy/gangway.example.yaml"

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
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" { // environment only
			continue
		}
		if opts == "inline" {
			out = append(out, yamlFields(f.Type, prefix)...)
			continue
		}
		if prefix == "" {
			out = append(out, yamlFields(f.Type, name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

func TestValidate(t *testing.T) {
	// valid is the default config plus what has no usable default: a node ID
	// that does not depend on the test machine's hostname, and fake GPUs.
	valid := func() Config {
		c := Default()
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
		"jobs: a policy with users": {
			change: func(c *Config) {
				c.Jobs.Teams = map[string][]string{"nlp": {"gw-nlp", "gw-nlp-big"}}
				c.Jobs.AllowEnv = []string{"LD_LIBRARY_PATH"}
			},
			agent: true,
		},
		"jobs: bad policy": {
			change: func(c *Config) {
				c.Jobs.AllowEnv = []string{"PATH"}
				c.Jobs.PassEnv = []string{"GANGWAY_REDIS_URL", "AWS_SECRET_ACCESS_KEY", "BAD-NAME"}
				c.Jobs.Teams = map[string][]string{"nlp": {"root"}, "vision": {}, "Bad": {"x"}, "cv": {"Not A User"}}
				c.Jobs.Default = "root"
			},
			wantErrs: []string{
				`jobs.allowEnv[0]: "PATH" is not a loader variable (LD_*, DYLD_*, GLIBC_TUNABLES); other names need no allowing`,
				`jobs.passEnv[0]: GANGWAY_REDIS_URL: the agent's GANGWAY_* variables hold its credentials and the workload contract sets the task's own`,
				`jobs.passEnv[1]: AWS_SECRET_ACCESS_KEY: AWS_* are the agent's cloud credentials, never a task's`,
				`jobs.passEnv[2]: not an environment variable name: "BAD-NAME"`,
				`jobs.users.Bad: must be a team name (a DNS label)`,
				`jobs.users.cv[0]: must be a Unix user name (lowercase letters, digits, '_', '-', at most 32), got "Not A User"`,
				`jobs.users.nlp[0]: tasks never run as root`,
				`jobs.users.vision: give at least one Unix user (the first is the team's default)`,
				`jobs.defaultUser: tasks never run as root`,
			},
		},
		"tls: an API key without TLS, TLS on a redis:// URL, a certificate without its key": {
			change: func(c *Config) {
				c.Temporal.APIKey = "k3y"
				c.Redis.TLS.CAFile = "/nonexistent/ca.pem"
				c.Temporal.TLS.CertFile = "/nonexistent/client.pem"
			},
			wantErrs: []string{
				"temporal.tls.certFile: certFile and keyFile go together: give both for mutual TLS, or neither",
				"temporal.tls.certFile: stat /nonexistent/client.pem: no such file or directory",
				"redis.tls: is set, but redis.url is not a rediss:// URL: redis://127.0.0.1:6379/0",
				"redis.tls.caFile: stat /nonexistent/ca.pem: no such file or directory",
			},
		},
		"join tokens without a secret": {
			change:   func(c *Config) { c.Server.Join.TokensFile = "config_test.go" },
			server:   true,
			wantErrs: []string{"server.join.secretFile: is required with server.join.tokensFile: it signs the node token each agent gets when it joins, without which no agent could restart or report a GPU fault"},
		},
		"temporal address without port": {
			change:   func(c *Config) { c.Temporal.Address = "temporal" },
			wantErrs: []string{`temporal.address: want host:port, got "temporal"`},
		},
		"empty namespace": {
			change:   func(c *Config) { c.Temporal.Namespace = "" },
			wantErrs: []string{"temporal.namespace: must not be empty"},
		},
		"a Sentinel redis URL, for server and agent": {
			change: func(c *Config) {
				c.Redis.URL = "redis://127.0.0.1:26379/0?master_name=gangway&addr=127.0.0.1:26380"
				c.Cloud.Join.RedisURL = c.Redis.URL
			},
			server: true, agent: true,
		},
		"a Sentinel redis URL with an option go-redis does not know": {
			change:   func(c *Config) { c.Redis.URL = "redis://127.0.0.1:26379/0?master_name=gangway&bogus=1" },
			wantErrs: []string{"redis.url: redis: unexpected option: bogus"},
		},
		"a Redis Cluster URL, for server and agent": {
			change: func(c *Config) {
				c.Redis.URL = "redis://127.0.0.1:7000?cluster=true&addr=127.0.0.1:7001"
				c.Cloud.Join.RedisURL = c.Redis.URL
			},
			server: true, agent: true,
		},
		"a Redis Cluster URL with a bad cluster value": {
			change:   func(c *Config) { c.Redis.URL = "redis://127.0.0.1:7000?cluster=maybe" },
			wantErrs: []string{"redis.url: cluster=maybe: want true or false"},
		},
		"a Redis Cluster URL with a database": {
			change:   func(c *Config) { c.Redis.URL = "redis://127.0.0.1:7000/2?cluster=true" },
			wantErrs: []string{"redis.url: a Redis Cluster has database 0 alone, got /2"},
		},
		"Sentinels and a Cluster at once": {
			change:   func(c *Config) { c.Redis.URL = "redis://127.0.0.1:7000?cluster=true&master_name=gangway" },
			wantErrs: []string{"redis.url: cluster=true and master_name name two kinds of Redis: Sentinels or a Cluster, not both"},
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
		"defrag on, with windows": {
			change: func(c *Config) {
				c.Server.Placement.Defrag.Enabled = true
				c.Server.Placement.Defrag.Windows = []string{"22:00-06:00", "12:00-13:30"}
				c.Server.Placement.Defrag.Timezone = "Europe/Berlin"
			},
			server: true,
		},
		"defrag on without a budget, bad windows and zone": {
			change: func(c *Config) {
				d := &c.Server.Placement.Defrag
				d.Enabled, d.MaxMovesPerHour, d.MaxLostGPUSecondsPerHour = true, 0, 0
				d.RestartOverhead.Duration = -time.Second
				d.Windows = []string{"22:00-06:00", "10-12", "25:00-01:00"}
				d.Timezone = "Mars/Olympus"
			},
			server: true,
			wantErrs: []string{
				"server.placement.defrag.maxMovesPerHour: must be at least 1 when defrag is enabled, got 0",
				"server.placement.defrag.maxLostGPUSecondsPerHour: must be positive when defrag is enabled, got 0",
				"server.placement.defrag.restartOverhead: must not be negative, got -1s",
				`server.placement.defrag.windows[1]: want HH:MM-HH:MM such as 22:00-06:00, got "10-12"`,
				`server.placement.defrag.windows[2]: want HH:MM-HH:MM such as 22:00-06:00, got "25:00-01:00"`,
				`server.placement.defrag.timezone: want an IANA time zone such as Europe/Berlin, got "Mars/Olympus"`,
			},
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
			wantErrs: []string{`agent.fakeGPUs: want COUNTxMODEL such as 8xH100, got "H100x8": GPUs per node must be 1..8, got "H100"`},
		},
		"nine fake GPUs": {
			change:   func(c *Config) { c.Agent.FakeGPUs = "9xH100" },
			agent:    true,
			wantErrs: []string{`agent.fakeGPUs: want COUNTxMODEL such as 8xH100, got "9xH100": GPUs per node must be 1..8, got "9"`},
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
	tests := map[string]struct {
		in      string
		want    agent.NodeShape
		wantErr bool
	}{
		"eight H100":        {in: "8xH100", want: agent.NodeShape{Count: 1, GPUs: 8, Model: "H100"}},
		"model with an x":   {in: "4xRTX6000", want: agent.NodeShape{Count: 1, GPUs: 4, Model: "RTX6000"}},
		"MIG devices":       {in: "2xH100:mig1=3g.40gb*2", want: agent.NodeShape{Count: 1, GPUs: 2, Model: "H100", MIGGPUs: 1, MIG: []string{"3g.40gb", "3g.40gb"}}},
		"bad MIG layout":    {in: "2xH100:mig=9g.40gb", wantErr: true},
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
			got, err := ParseFakeGPUs(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseFakeGPUs(%q) error = %v, want error %t", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseFakeGPUs(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestValidateHidesPasswords: a malformed URL's password never reaches the
// error text.
func TestValidateHidesPasswords(t *testing.T) {
	c := Default()
	c.Redis.URL = "redis://:s3cret-pw@host:port-is-bad/0"
	c.Cloud.Join.RedisURL = "redis://u:s3cret-pw@[bad"
	c.Cloud.Providers = []ProviderConfig{{Type: ProviderFake, Endpoint: "ftp://u:s3cret-pw@host",
		Pools: []FakePoolConfig{{Zone: "z", InstanceType: "t", GPUModel: "A100", GPUs: 8, CapacityType: "spot"}}}}
	err := c.Validate(true, false)
	if err == nil {
		t.Fatal("bad URLs validated")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a password is in the error:\n%v", err)
	}
	for _, field := range []string{"redis.url", "cloud.join.redisURL", "cloud.providers[0].endpoint"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("the error does not name %s:\n%v", field, err)
		}
	}
}

// TestDefragOptions: the defrag section becomes placement's options, its
// windows parsed and its zone loaded.
func TestDefragOptions(t *testing.T) {
	c := Default().Server.Placement
	c.Defrag.Enabled, c.Defrag.Windows, c.Defrag.Timezone = true, []string{"22:00-06:30"}, "UTC"
	o, err := c.Options()
	if err != nil {
		t.Fatal(err)
	}
	d := o.Defrag
	got := []any{d.Enabled, d.MaxMovesPerHour, d.MaxLostGPUSecondsPerHour, d.MaxCheckpointAge, d.RestartOverhead, d.Windows, d.Location.String()}
	want := []any{true, 12, 7200.0, 10 * time.Minute, 30 * time.Second,
		[]placement.Window{{From: 22 * time.Hour, To: 6*time.Hour + 30*time.Minute}}, "UTC"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defrag options (-want +got):\n%s", diff)
	}
}

// TestAgentJoin: the join token comes from the file when one is named
// (trimmed), else from the environment's; a missing file names the field.
func TestAgentJoin(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/join"
	if err := os.WriteFile(file, []byte("  from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		c       AgentConfig
		want    agent.JoinConfig
		wantErr string
	}{
		"env":     {c: AgentConfig{JoinToken: "from-env", DataDir: dir}, want: agent.JoinConfig{Token: "from-env", TokenFile: dir + "/node-token"}},
		"file":    {c: AgentConfig{JoinToken: "from-env", JoinTokenFile: file, DataDir: dir}, want: agent.JoinConfig{Token: "from-file", TokenFile: dir + "/node-token"}},
		"missing": {c: AgentConfig{JoinTokenFile: dir + "/none"}, wantErr: "agent.joinTokenFile"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.c.Join()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Join error = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Join() = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestServerDispatch: the dispatch loop gets the server's intervals and
// TTLs, the placement options and the burst delay and prices given.
func TestServerDispatch(t *testing.T) {
	s := Default().Server
	prices := map[string]float64{"onprem": 1.5}
	dc, err := s.Dispatch(time.Minute, prices)
	if err != nil {
		t.Fatal(err)
	}
	if dc.Interval != s.DispatchInterval.Duration || dc.LeaseTTL != s.LeaseTTL.Duration || dc.NodeTTL != s.NodeTTL.Duration ||
		dc.Placement.BurstAfter != time.Minute || dc.OnPremPrices["onprem"] != 1.5 || dc.Placement.Scorer == nil {
		t.Errorf("Dispatch() = %+v", dc)
	}
	s.Placement.Policy = "no-such-policy"
	if _, err := s.Dispatch(0, nil); err == nil {
		t.Error("Dispatch with an unknown policy: no error")
	}
}
