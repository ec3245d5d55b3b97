package config

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/internal/redact"
	"github.com/gangwayhq/gangway/internal/transport"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

// Config is everything gangway reads at start: one struct, one Validate.
// deploy/gangway.example.yaml documents every field.
type Config struct {
	Temporal   TemporalConfig   `yaml:"temporal"`
	Redis      RedisConfig      `yaml:"redis"`
	Log        LogConfig        `yaml:"log"`
	Server     ServerConfig     `yaml:"server"`
	Agent      AgentConfig      `yaml:"agent"`
	Checkpoint CheckpointConfig `yaml:"checkpoint"`
	Ledger     LedgerConfig     `yaml:"ledger"`
	Cloud      CloudConfig      `yaml:"cloud"`
	API        APIConfig        `yaml:"api"`
	Jobs       JobsConfig       `yaml:"jobs"`
}

// JobsConfig is the site's policy for what jobs may ask of the nodes they
// run on: the loader variables a spec may set (checked at submit), the
// agent variables tasks get, and the Unix users they run as (each team's,
// a spec choosing among them with runAs). The user API checks submitted
// specs against it; every agent applies it.
type JobsConfig struct {
	// AllowEnv names the loader variables (LD_*, DYLD_*, GLIBC_TUNABLES) a
	// spec may set; any other is refused at submit.
	AllowEnv []string `yaml:"allowEnv"`
	// PassEnv names the variables of the agent's own environment a task
	// gets; nothing else of it reaches a task.
	PassEnv           []string `yaml:"passEnv"`
	gangway.TaskUsers `yaml:",inline"`
}

// ValidateOptions are the spec checks of submit under this policy.
func (j JobsConfig) ValidateOptions() []gangway.ValidateOption {
	opts := []gangway.ValidateOption{gangway.AllowEnv(j.AllowEnv...)}
	if j.Enabled() {
		opts = append(opts, gangway.WithTaskUsers(j.TaskUsers))
	}
	return opts
}

// validate reports each bad field of the jobs section through bad.
func (j JobsConfig) validate(bad func(field, format string, args ...any)) {
	for i, name := range j.AllowEnv {
		if !gangway.IsLoaderEnv(name) {
			bad(fmt.Sprintf("jobs.allowEnv[%d]", i), "%q is not a loader variable (LD_*, DYLD_*, GLIBC_TUNABLES); other names need no allowing", name)
		}
	}
	for i, name := range j.PassEnv {
		field := fmt.Sprintf("jobs.passEnv[%d]", i)
		switch {
		case !envNameRE.MatchString(name):
			bad(field, "not an environment variable name: %q", name)
		case strings.HasPrefix(name, "GANGWAY_"):
			bad(field, "%s: the agent's GANGWAY_* variables hold its credentials and the workload contract sets the task's own", name)
		case strings.HasPrefix(name, "AWS_"):
			bad(field, "%s: AWS_* are the agent's cloud credentials, never a task's", name)
		}
	}
	for _, team := range slices.Sorted(maps.Keys(j.Teams)) {
		field := "jobs.users." + team
		if !gangway.IsDNSLabel(team) {
			bad(field, "must be a team name (a DNS label)")
			continue
		}
		if len(j.Teams[team]) == 0 {
			bad(field, "give at least one Unix user (the first is the team's default)")
		}
		for i, u := range j.Teams[team] {
			checkTaskUser(bad, fmt.Sprintf("%s[%d]", field, i), u)
		}
	}
	if j.Default != "" {
		checkTaskUser(bad, "jobs.defaultUser", j.Default)
	}
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkTaskUser(bad func(field, format string, args ...any), field, name string) {
	switch {
	case !gangway.IsUnixUser(name):
		bad(field, "must be a Unix user name (lowercase letters, digits, '_', '-', at most 32), got %q", name)
	case name == "root":
		bad(field, "tasks never run as root")
	}
}

// LedgerConfig locates the SQL usage ledger `gangway server` records every
// run to and `gangway cost` reads (internal/accounting).
type LedgerConfig struct {
	// DSN is sqlite:PATH (one server) or postgres://... (several).
	DSN string `yaml:"dsn"`
}

// CheckpointConfig locates the checkpoint store every agent uploads to and
// the server reads the newest checkpoint from (docs/checkpointing.md).
type CheckpointConfig struct {
	// Store is file:///path (shared storage every node mounts) or
	// s3://bucket/prefix.
	Store string `yaml:"store"`
	// S3 settings, for s3:// stores.
	S3Endpoint  string `yaml:"s3Endpoint"`  // "" = AWS; else an S3-compatible endpoint URL
	S3PathStyle bool   `yaml:"s3PathStyle"` // path-style addressing (MinIO, Ceph)
	S3Region    string `yaml:"s3Region"`
}

// TemporalConfig locates the Temporal frontend and says how to reach it:
// TLS or mutual TLS (TLS), and an API key sent as a bearer token.
type TemporalConfig struct {
	Address   string             `yaml:"address"`
	Namespace string             `yaml:"namespace"`
	TLS       transport.TLSFiles `yaml:"tls"`
	// APIKey is best given in the environment (GANGWAY_TEMPORAL_API_KEY).
	APIKey string `yaml:"apiKey"`
}

// Transport is the connection the config describes.
func (t TemporalConfig) Transport() transport.Temporal {
	return transport.Temporal{Address: t.Address, Namespace: t.Namespace, TLS: t.TLS, APIKey: t.APIKey}
}

// RedisConfig locates the Redis view. The URL names the ACL user and its
// password (redis://user:password@host:port/db), rediss:// for TLS, which
// TLS refines (a CA, a client certificate, a server name).
type RedisConfig struct {
	URL    string             `yaml:"url"`
	Prefix string             `yaml:"prefix"`
	TLS    transport.TLSFiles `yaml:"tls"`
}

// Transport is the connection the config describes.
func (r RedisConfig) Transport() transport.Redis { return transport.Redis{URL: r.URL, TLS: r.TLS} }

// LogConfig sets log level and format.
type LogConfig struct {
	Level  string `yaml:"level"`  // debug|info|warn|error
	Format string `yaml:"format"` // text|json
}

// ServerConfig tunes `gangway server`.
type ServerConfig struct {
	MetricsAddr      string           `yaml:"metricsAddr"`
	DispatchInterval gangway.Duration `yaml:"dispatchInterval"`
	LeaseTTL         gangway.Duration `yaml:"leaseTTL"`
	NodeTTL          gangway.Duration `yaml:"nodeTTL"`
	Placement        PlacementConfig  `yaml:"placement"`
	Join             ServerJoinConfig `yaml:"join"`
}

// ServerJoinConfig is what agents join with (internal/nodeauth).
type ServerJoinConfig struct {
	// TokensFile lists the join tokens by SHA-256, each for a pool or a
	// node; re-read when it changes.
	TokensFile string `yaml:"tokensFile"`
	// SecretFile holds the secrets node tokens and cloud instances'
	// one-use tokens are signed with, newest first.
	SecretFile string `yaml:"secretFile"`
}

// PlacementConfig tunes the placement engine the dispatch loop runs.
type PlacementConfig struct {
	// Policy is the scorer: gangway (default), fgd, best-fit, first-fit, ...
	Policy string `yaml:"policy"`
	// Reservations is how many blocked jobs get GPUs reserved (backfill).
	Reservations int `yaml:"reservations"`
	// Preempt lets higher-priority jobs, and teams reclaiming lent quota,
	// stop preemptible jobs; MinRuntime protects young ones.
	Preempt    bool             `yaml:"preempt"`
	MinRuntime gangway.Duration `yaml:"minRuntime"`
	// MaxAssignments caps jobs started per cycle (0: no cap).
	MaxAssignments int `yaml:"maxAssignments"`
	// SampleNodes bounds the nodes scored per replica (0: all).
	SampleNodes int                `yaml:"sampleNodes"`
	TeamWeights map[string]float64 `yaml:"teamWeights"`
	Quotas      []QuotaConfig      `yaml:"quotas"`
	// Defrag moves cheap checkpointing jobs so that fragmented jobs fit.
	Defrag DefragConfig `yaml:"defrag"`
}

// DefragConfig is planned defragmentation (placement.Defrag): when a job
// waits only because the free GPUs are scattered, the dispatch loop moves
// the fewest preemptible, checkpointing jobs with a recent checkpoint
// elsewhere, within an hourly budget and, if any are given, daily windows.
type DefragConfig struct {
	Enabled                  bool    `yaml:"enabled"`
	MaxMovesPerHour          int     `yaml:"maxMovesPerHour"`
	MaxLostGPUSecondsPerHour float64 `yaml:"maxLostGPUSecondsPerHour"`
	// MaxCheckpointAge: a job whose newest checkpoint is older is not
	// moved. RestartOverhead is what a restart costs a moved job, per GPU.
	MaxCheckpointAge gangway.Duration `yaml:"maxCheckpointAge"`
	RestartOverhead  gangway.Duration `yaml:"restartOverhead"`
	// Windows are "HH:MM-HH:MM" in Timezone (an IANA name; default UTC);
	// none means at any time, under the budget.
	Windows  []string `yaml:"windows"`
	Timezone string   `yaml:"timezone"`
}

// Options is the configuration as placement's options; the error names
// the field that is wrong.
func (d DefragConfig) Options() (placement.Defrag, error) {
	o := placement.Defrag{Enabled: d.Enabled, MaxMovesPerHour: d.MaxMovesPerHour, MaxLostGPUSecondsPerHour: d.MaxLostGPUSecondsPerHour,
		MaxCheckpointAge: d.MaxCheckpointAge.Duration, RestartOverhead: d.RestartOverhead.Duration}
	for k, w := range d.Windows {
		pw, err := ParseWindow(w)
		if err != nil {
			return placement.Defrag{}, fmt.Errorf("server.placement.defrag.windows[%d]: %w", k, err)
		}
		o.Windows = append(o.Windows, pw)
	}
	loc, err := time.LoadLocation(cmp.Or(d.Timezone, "UTC"))
	if err != nil {
		return placement.Defrag{}, fmt.Errorf("server.placement.defrag.timezone: want an IANA time zone such as Europe/Berlin, got %q", d.Timezone)
	}
	o.Location = loc
	return o, nil
}

// ParseWindow reads a daily window, "HH:MM-HH:MM" (24-hour clock); an end
// at or before the start wraps past midnight ("22:00-06:00").
func ParseWindow(s string) (placement.Window, error) {
	from, to, ok := strings.Cut(s, "-")
	f, err1 := parseClock(from)
	t, err2 := parseClock(to)
	if !ok || err1 != nil || err2 != nil {
		return placement.Window{}, fmt.Errorf("want HH:MM-HH:MM such as 22:00-06:00, got %q", s)
	}
	return placement.Window{From: f, To: t}, nil
}

func parseClock(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// QuotaConfig is one team's GPU quota for a model, within a cohort.
type QuotaConfig struct {
	Team           string `yaml:"team"`
	Model          string `yaml:"model"` // "" = any model
	Nominal        int    `yaml:"nominal"`
	BorrowingLimit *int   `yaml:"borrowingLimit"` // unset: no cap
	LendingLimit   *int   `yaml:"lendingLimit"`   // unset: lend all unused
	Cohort         string `yaml:"cohort"`
}

// Options turns the config into placement options.
func (p PlacementConfig) Options() (placement.Options, error) {
	sc, err := baselines.ScorerByName(p.Policy)
	if err != nil {
		return placement.Options{}, err
	}
	o := placement.Options{Scorer: sc, Reservations: p.Reservations, Preempt: p.Preempt,
		MinRuntime: p.MinRuntime.Duration, MaxAssignments: p.MaxAssignments, SampleNodes: p.SampleNodes,
		Fairness: placement.Fairness{TeamWeights: p.TeamWeights}}
	if o.Defrag, err = p.Defrag.Options(); err != nil {
		return placement.Options{}, err
	}
	for _, q := range p.Quotas {
		o.Quotas = append(o.Quotas, placement.Quota{Team: q.Team, Model: q.Model, Nominal: q.Nominal,
			BorrowingLimit: q.BorrowingLimit, LendingLimit: q.LendingLimit, Cohort: q.Cohort})
	}
	return o, nil
}

// AgentConfig tunes `gangway agent`.
type AgentConfig struct {
	NodeID            string           `yaml:"nodeId"`
	Pool              string           `yaml:"pool"`
	Addr              string           `yaml:"addr"`
	DataDir           string           `yaml:"dataDir"`
	FakeGPUs          string           `yaml:"fakeGPUs"` // e.g. "8xH100"; "" reads the GPUs with NVML
	HeartbeatInterval gangway.Duration `yaml:"heartbeatInterval"`
	// Notices picks the cloud preemption-notice watcher: auto, aws, gcp or none.
	Notices string `yaml:"notices"`
	// MetricsAddr serves the per-GPU metrics ("" = off).
	MetricsAddr string `yaml:"metricsAddr"`
	// JoinTokenFile holds the token the agent joins with (or give it in
	// GANGWAY_JOIN_TOKEN); the node token the server returns is kept in
	// dataDir/node-token.
	JoinTokenFile string `yaml:"joinTokenFile"`
	// JoinToken is GANGWAY_JOIN_TOKEN (never from the file).
	JoinToken string `yaml:"-"`
	// SampleInterval, ZombieGrace and IdleReport tune GPU health and
	// reclaim (agent.GPUConfig).
	SampleInterval gangway.Duration `yaml:"sampleInterval"`
	ZombieGrace    gangway.Duration `yaml:"zombieGrace"`
	IdleReport     gangway.Duration `yaml:"idleReport"`
	// ShutdownGrace caps how long each task may take to stop when the
	// agent shuts down (agent.Config.ShutdownGrace).
	ShutdownGrace gangway.Duration `yaml:"shutdownGrace"`
}

func Default() Config {
	host, _ := os.Hostname()
	return Config{
		Temporal: TemporalConfig{Address: "127.0.0.1:7233", Namespace: "default"},
		Redis:    RedisConfig{URL: "redis://127.0.0.1:6379/0", Prefix: "{gangway}"},
		Log:      LogConfig{Level: "info", Format: "text"},
		Server: ServerConfig{
			MetricsAddr:      ":9090",
			DispatchInterval: gangway.Duration{Duration: 500 * time.Millisecond},
			LeaseTTL:         gangway.Duration{Duration: 5 * time.Second},
			NodeTTL:          gangway.Duration{Duration: 10 * time.Second},
			Placement: PlacementConfig{
				Policy:       "gangway",
				Reservations: 4,
				Preempt:      true,
				MinRuntime:   gangway.Duration{Duration: 10 * time.Minute},
				Defrag: DefragConfig{MaxMovesPerHour: 12, MaxLostGPUSecondsPerHour: 7200,
					MaxCheckpointAge: gangway.Duration{Duration: placement.DefaultMaxCheckpointAge},
					RestartOverhead:  gangway.Duration{Duration: 30 * time.Second}, Timezone: "UTC"},
			},
		},
		Agent: AgentConfig{
			NodeID:            nodeIDFromHost(host),
			Pool:              "onprem",
			Addr:              host,
			DataDir:           "/var/lib/gangway",
			HeartbeatInterval: gangway.Duration{Duration: 2 * time.Second},
			Notices:           "auto",
			MetricsAddr:       ":9091",
			SampleInterval:    gangway.Duration{Duration: agent.DefaultSampleInterval},
			ZombieGrace:       gangway.Duration{Duration: agent.DefaultZombieGrace},
			ShutdownGrace:     gangway.Duration{Duration: agent.DefaultShutdownGrace},
			IdleReport:        gangway.Duration{Duration: agent.DefaultIdleReport},
		},
		Checkpoint: CheckpointConfig{Store: "file:///var/lib/gangway/checkpoints"},
		// In the server unit's StateDirectory (deploy/systemd); the agent's
		// unit owns /var/lib/gangway.
		Ledger: LedgerConfig{DSN: "sqlite:/var/lib/gangway-server/ledger.db"},
		Cloud:  defaultCloudConfig(),
		API:    defaultAPIConfig(),
		Jobs:   JobsConfig{PassEnv: slices.Clone(agent.DefaultPassEnv)},
	}
}

// nodeIDFromHost is the first label of the hostname, lowercased, so an
// FQDN still makes a valid node ID.
func nodeIDFromHost(host string) string {
	label, _, _ := strings.Cut(host, ".")
	return strings.ToLower(label)
}

// envVars maps environment variables to the flags they stand for.
var envVars = map[string]string{
	"GANGWAY_TEMPORAL_ADDRESS": "temporal-address",
	"GANGWAY_NAMESPACE":        "namespace",
	"GANGWAY_REDIS_URL":        "redis-url",
	"GANGWAY_LOG_LEVEL":        "log-level",
	"GANGWAY_LEDGER_DSN":       "ledger",
}

// secretEnv maps environment variables that have no flag, since a
// command line is no place for a secret, to the fields they set.
var secretEnv = map[string]func(*Config, string){
	"GANGWAY_TEMPORAL_API_KEY": func(c *Config, v string) { c.Temporal.APIKey = v },
	"GANGWAY_JOIN_TOKEN":       func(c *Config, v string) { c.Agent.JoinToken = v },
}

// EnvNames are the environment variables Load reads, GANGWAY_CONFIG
// included, sorted.
func EnvNames() []string {
	names := append(slices.Collect(maps.Keys(envVars)), slices.Collect(maps.Keys(secretEnv))...)
	return append(slices.Sorted(slices.Values(names)), "GANGWAY_CONFIG")
}

// BindGlobalFlags binds the flags every command shares to cfg's fields.
func BindGlobalFlags(fs *pflag.FlagSet, cfg *Config, configFile *string) {
	fs.StringVar(configFile, "config", os.Getenv("GANGWAY_CONFIG"), "config file (YAML; env GANGWAY_CONFIG)")
	fs.StringVar(&cfg.Temporal.Address, "temporal-address", cfg.Temporal.Address, "Temporal frontend host:port (env GANGWAY_TEMPORAL_ADDRESS)")
	fs.StringVar(&cfg.Temporal.Namespace, "namespace", cfg.Temporal.Namespace, "Temporal namespace (env GANGWAY_NAMESPACE)")
	fs.StringVar(&cfg.Redis.URL, "redis-url", cfg.Redis.URL, "Redis URL (env GANGWAY_REDIS_URL)")
	fs.StringVar(&cfg.Log.Level, "log-level", cfg.Log.Level, "log level: debug, info, warn, error (env GANGWAY_LOG_LEVEL)")
}

// Load fills cfg from defaults, the config file, the environment and the
// flags that were set, in rising precedence. Flags are bound to cfg's
// fields, so their values are saved, the lower layers applied, and the
// changed flags set again.
func Load(fs *pflag.FlagSet, cfg *Config, configFile string) error {
	var data []byte
	if configFile != "" {
		var err error
		if data, err = os.ReadFile(configFile); err != nil {
			return fmt.Errorf("config file: %w", err)
		}
	}
	return load(fs, cfg, configFile, data)
}

// load is Load with the config file already read: data is its content,
// configFile its name ("" = no file).
func load(fs *pflag.FlagSet, cfg *Config, configFile string, data []byte) error {
	changed := map[string]string{}
	fs.Visit(func(f *pflag.Flag) { changed[f.Name] = f.Value.String() })
	*cfg = Default()
	if configFile != "" {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("config file %s: %w", configFile, err)
		}
	}
	for env, flag := range envVars {
		if v, ok := os.LookupEnv(env); ok && fs.Lookup(flag) != nil {
			if err := fs.Set(flag, v); err != nil {
				return fmt.Errorf("%s: %w", env, err)
			}
		}
	}
	for env, set := range secretEnv {
		if v, ok := os.LookupEnv(env); ok {
			set(cfg, v)
		}
	}
	// Re-applying every flag's own default would undo the file; only the
	// flags the user set are applied again. Unchanged flags still point at
	// cfg's fields, which now hold file/env values.
	for name, v := range changed {
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("--%s: %w", name, err)
		}
	}
	return nil
}

// Validate checks the fields a command uses; what names the field in YAML.
func (c Config) Validate(server, agentCmd bool) error {
	var errs fieldErrors
	bad := errs.add
	if _, _, err := net.SplitHostPort(c.Temporal.Address); err != nil {
		bad("temporal.address", "want host:port, got %q", c.Temporal.Address)
	}
	if c.Temporal.Namespace == "" {
		bad("temporal.namespace", "must not be empty")
	}
	for _, p := range c.Temporal.TLS.Problems() {
		bad("temporal.tls."+p[0], "%s", p[1])
	}
	if c.Temporal.APIKey != "" && !c.Temporal.TLS.On() {
		bad("temporal.apiKey", "needs TLS (temporal.tls): an API key must not travel in plaintext")
	}
	if err := transport.CheckURL(c.Redis.URL); err != nil {
		bad("redis.url", "%v", err)
	} else if c.Redis.TLS.On() && !strings.HasPrefix(c.Redis.URL, "rediss://") {
		bad("redis.tls", "is set, but redis.url is not a rediss:// URL: %s", redact.URL(c.Redis.URL))
	}
	for _, p := range c.Redis.TLS.Problems() {
		bad("redis.tls."+p[0], "%s", p[1])
	}
	if c.Redis.Prefix == "" {
		bad("redis.prefix", "must not be empty")
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		bad("log.level", "%v", err)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", "must be text or json, got %q", c.Log.Format)
	}
	if server {
		s := c.Server
		if s.DispatchInterval.Duration <= 0 {
			bad("server.dispatchInterval", "must be positive, got %v", s.DispatchInterval.Duration)
		}
		if s.LeaseTTL.Duration < 2*s.DispatchInterval.Duration {
			bad("server.leaseTTL", "must be at least twice server.dispatchInterval (%v), got %v", s.DispatchInterval.Duration, s.LeaseTTL.Duration)
		}
		if s.NodeTTL.Duration <= 0 {
			bad("server.nodeTTL", "must be positive, got %v", s.NodeTTL.Duration)
		}
		p := s.Placement
		if _, err := baselines.ScorerByName(p.Policy); err != nil {
			bad("server.placement.policy", "%v", err)
		}
		if p.Reservations < 0 {
			bad("server.placement.reservations", "must not be negative, got %d", p.Reservations)
		}
		if p.MinRuntime.Duration < 0 {
			bad("server.placement.minRuntime", "must not be negative, got %v", p.MinRuntime.Duration)
		}
		if p.SampleNodes < 0 {
			bad("server.placement.sampleNodes", "must not be negative, got %d", p.SampleNodes)
		}
		if p.MaxAssignments < 0 {
			bad("server.placement.maxAssignments", "must not be negative, got %d", p.MaxAssignments)
		}
		p.Defrag.validate(bad)
		for team, w := range p.TeamWeights {
			if w <= 0 {
				bad("server.placement.teamWeights."+team, "must be positive, got %v", w)
			}
		}
		for k, q := range p.Quotas {
			field := fmt.Sprintf("server.placement.quotas[%d]", k)
			switch {
			case !gangway.IsDNSLabel(q.Team):
				bad(field+".team", "must be a team name (a DNS label), got %q", q.Team)
			case q.Nominal < 0:
				bad(field+".nominal", "must not be negative, got %d", q.Nominal)
			case q.BorrowingLimit != nil && *q.BorrowingLimit < 0:
				bad(field+".borrowingLimit", "must not be negative, got %d", *q.BorrowingLimit)
			case q.LendingLimit != nil && *q.LendingLimit < 0:
				bad(field+".lendingLimit", "must not be negative, got %d", *q.LendingLimit)
			}
		}
		if s.Join.TokensFile != "" && s.Join.SecretFile == "" {
			bad("server.join.secretFile", "is required with server.join.tokensFile: it signs the node token each agent gets when it joins, without which no agent could restart or report a GPU fault")
		}
		for _, f := range []struct{ field, path string }{{"server.join.tokensFile", s.Join.TokensFile}, {"server.join.secretFile", s.Join.SecretFile}} {
			if f.path != "" {
				if _, err := os.Stat(f.path); err != nil {
					bad(f.field, "%v", err)
				}
			}
		}
		c.Cloud.validate(bad)
		c.API.validate(bad)
		c.validateCloudJoin(bad)
	}
	if agentCmd {
		a := c.Agent
		if !gangway.IsDNSLabel(a.NodeID) {
			bad("agent.nodeId", "must be a DNS label (lowercase letters, digits, '-'), got %q", a.NodeID)
		}
		if !gangway.IsDNSLabel(a.Pool) {
			bad("agent.pool", "must be a DNS label, got %q", a.Pool)
		}
		if a.DataDir == "" {
			bad("agent.dataDir", "must not be empty")
		}
		if a.FakeGPUs != "" {
			if _, err := ParseFakeGPUs(a.FakeGPUs); err != nil {
				bad("agent.fakeGPUs", "%v", err)
			}
		}
		for _, d := range []struct {
			field string
			d     time.Duration
		}{{"agent.sampleInterval", a.SampleInterval.Duration}, {"agent.zombieGrace", a.ZombieGrace.Duration},
			{"agent.idleReport", a.IdleReport.Duration}, {"agent.shutdownGrace", a.ShutdownGrace.Duration}} {
			if d.d <= 0 {
				bad(d.field, "must be positive, got %v", d.d)
			}
		}
		if a.JoinTokenFile != "" {
			if _, err := os.Stat(a.JoinTokenFile); err != nil {
				bad("agent.joinTokenFile", "%v", err)
			}
		}
		if a.HeartbeatInterval.Duration <= 0 {
			bad("agent.heartbeatInterval", "must be positive, got %v", a.HeartbeatInterval.Duration)
		}
		switch a.Notices {
		case "auto", "aws", "gcp", "none":
		default:
			bad("agent.notices", "must be auto, aws, gcp or none, got %q", a.Notices)
		}
	}
	if server && !strings.HasPrefix(c.Ledger.DSN, "sqlite:") && !strings.HasPrefix(c.Ledger.DSN, "postgres://") &&
		!strings.HasPrefix(c.Ledger.DSN, "postgresql://") {
		bad("ledger.dsn", "want %s, got %q", accounting.DSNHelp, redact.URL(c.Ledger.DSN))
	}
	c.Jobs.validate(bad)
	if server || agentCmd {
		if !strings.HasPrefix(c.Checkpoint.Store, "file://") && !strings.HasPrefix(c.Checkpoint.Store, "s3://") {
			bad("checkpoint.store", "must be a file:///path or s3://bucket/prefix URL, got %q", c.Checkpoint.Store)
		}
	}
	return errs.join()
}

// validate checks the defragmentation settings; the budget must allow
// something when it is on.
func (d DefragConfig) validate(bad func(field, format string, args ...any)) {
	const f = "server.placement.defrag."
	if d.Enabled && d.MaxMovesPerHour < 1 {
		bad(f+"maxMovesPerHour", "must be at least 1 when defrag is enabled, got %d", d.MaxMovesPerHour)
	} else if d.MaxMovesPerHour < 0 {
		bad(f+"maxMovesPerHour", "must not be negative, got %d", d.MaxMovesPerHour)
	}
	if d.Enabled && !(d.MaxLostGPUSecondsPerHour > 0) {
		bad(f+"maxLostGPUSecondsPerHour", "must be positive when defrag is enabled, got %v", d.MaxLostGPUSecondsPerHour)
	} else if d.MaxLostGPUSecondsPerHour < 0 {
		bad(f+"maxLostGPUSecondsPerHour", "must not be negative, got %v", d.MaxLostGPUSecondsPerHour)
	}
	if d.MaxCheckpointAge.Duration < 0 {
		bad(f+"maxCheckpointAge", "must not be negative, got %v", d.MaxCheckpointAge.Duration)
	}
	if d.RestartOverhead.Duration < 0 {
		bad(f+"restartOverhead", "must not be negative, got %v", d.RestartOverhead.Duration)
	}
	for k, w := range d.Windows {
		if _, err := ParseWindow(w); err != nil {
			bad(fmt.Sprintf("%swindows[%d]", f, k), "%v", err)
		}
	}
	if _, err := time.LoadLocation(cmp.Or(d.Timezone, "UTC")); err != nil {
		bad(f+"timezone", "want an IANA time zone such as Europe/Berlin, got %q", d.Timezone)
	}
}

// fieldErrors collects one error per bad field, each naming the field by
// its YAML path.
type fieldErrors []error

func (e *fieldErrors) add(field, format string, args ...any) {
	*e = append(*e, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

func (e fieldErrors) join() error { return errors.Join(e...) }

// ParseFakeGPUs parses "8xH100" into the shape of one node, as the node
// group "1x8:H100" of agent.ParseFleet; "1xH100:mig=1g.10gb*7" puts its
// GPUs in MIG mode as that group would.
func ParseFakeGPUs(s string) (agent.NodeShape, error) {
	gpus, model, ok := strings.Cut(s, "x")
	shape, err := agent.ParseNodeShape("1x" + gpus + ":" + model)
	switch {
	case !ok || strings.ContainsAny(s, ", ") || strings.Contains(model, ":") && !strings.Contains(model, ":mig"):
		return agent.NodeShape{}, fmt.Errorf("want COUNTxMODEL such as 8xH100, got %q", s)
	case err != nil && strings.Contains(model, ":mig"):
		return agent.NodeShape{}, fmt.Errorf("want COUNTxMODEL:migN=PROFILES such as 8xH100:mig2=1g.10gb*7, got %q: %w", s, err)
	case err != nil:
		return agent.NodeShape{}, fmt.Errorf("want COUNTxMODEL such as 8xH100, got %q: %w", s, err)
	}
	return shape, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("want debug, info, warn or error, got %q", s)
	}
	return l, nil
}

func NewLogger(c LogConfig) *slog.Logger { return NewLoggerTo(os.Stderr, c) }

func NewLoggerTo(w io.Writer, c LogConfig) *slog.Logger {
	level, _ := parseLevel(c.Level)
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// OpenGPUs reads the agent's GPUs: the synthetic inventory of FakeGPUs
// when it is set, else lib's (NVML). Without FakeGPUs on a machine with no
// NVIDIA driver it fails saying how to get a synthetic one.
func (c AgentConfig) OpenGPUs(lib gpuinfo.Library, log *slog.Logger) (agent.NodeGPUs, error) {
	o := agent.NodeGPUOptions{NodeID: c.NodeID, Pool: c.Pool, Addr: c.Addr}
	if c.FakeGPUs != "" {
		shape, err := ParseFakeGPUs(c.FakeGPUs)
		if err != nil {
			return agent.NodeGPUs{}, fmt.Errorf("--fake-gpus: %w", err)
		}
		o.Fake = shape
	}
	g, err := agent.OpenNodeGPUs(lib, o, log)
	if errors.Is(err, gpuinfo.ErrNoDriver) {
		return g, fmt.Errorf("%w; on a machine without NVIDIA GPUs use --fake-gpus 8xH100 for a synthetic inventory", err)
	}
	return g, err
}

// GPUConfig turns the agent's GPU health watch and reclaim on with the
// configured periods, exporting per-GPU readings to m.
func (c AgentConfig) GPUConfig(g agent.NodeGPUs, m *metrics.GPU) agent.GPUConfig {
	return agent.GPUConfig{Source: g.Source, Metrics: m, SampleInterval: c.SampleInterval.Duration,
		ZombieGrace: c.ZombieGrace.Duration, IdleReport: c.IdleReport.Duration}
}

// Join is how the agent joins through the server: the token from
// JoinTokenFile when one is named, else GANGWAY_JOIN_TOKEN's, and the node
// token the server returns kept in DataDir.
func (c AgentConfig) Join() (agent.JoinConfig, error) {
	token := c.JoinToken
	if c.JoinTokenFile != "" {
		b, err := os.ReadFile(c.JoinTokenFile)
		if err != nil {
			return agent.JoinConfig{}, fmt.Errorf("agent.joinTokenFile: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	return agent.JoinConfig{Token: token, TokenFile: filepath.Join(c.DataDir, "node-token")}, nil
}

// Dispatch is the dispatch loop's config from the server's settings: its
// intervals and TTLs, the placement engine's options with bursts allowed
// after burstAfter, and on-prem prices.
func (s ServerConfig) Dispatch(burstAfter time.Duration, onPremPrices map[string]float64) (dispatch.Config, error) {
	popts, err := s.Placement.Options()
	if err != nil {
		return dispatch.Config{}, err
	}
	popts.BurstAfter = burstAfter
	return dispatch.Config{Interval: s.DispatchInterval.Duration, LeaseTTL: s.LeaseTTL.Duration, NodeTTL: s.NodeTTL.Duration,
		Placement: popts, OnPremPrices: onPremPrices}, nil
}

// Open opens the store Store names. A file:// store's directory is
// created if it is missing, so the default works on a fresh node.
func (c CheckpointConfig) Open(ctx context.Context) (checkpoint.Store, error) {
	s, err := checkpoint.Open(ctx, c.Store, checkpoint.Options{Endpoint: c.S3Endpoint, UsePathStyle: c.S3PathStyle,
		Region: c.S3Region, CreateDir: true})
	if err != nil {
		return nil, fmt.Errorf("checkpoint.store: %w", err)
	}
	return s, nil
}
