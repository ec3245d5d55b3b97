package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/fake"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// promtool finds promtool or fails saying how to get it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: `make promtool` installs Debian's prometheus package, which has it (apt-get install -y prometheus)")
	}
	return p
}

// ruleFiles are the rule files of prometheus/ (not the promtool test file).
func ruleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("prometheus/*.yml")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, ".test.yml") })
	if len(files) == 0 {
		t.Fatal("no rule files in prometheus/")
	}
	return files
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestRulesPromtool checks every rule file with promtool, runs the alerts'
// unit tests, and checks every dashboard query parses (as a recording
// rule promtool checks).
func TestRulesPromtool(t *testing.T) {
	for _, f := range ruleFiles(t) {
		runPromtool(t, "check", "rules", f)
	}
	runPromtool(t, "test", "rules", "prometheus/gangway.alerts.test.yml")

	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, q := range dashboardQueries(t) {
		// Grafana's variables stand for a regex of label values.
		q = regexp.MustCompile(`\$\w+`).ReplaceAllString(q, ".*")
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query:%d", i), Expr: q})
	}
	doc := map[string]any{"groups": []any{map[string]any{"name": "dashboards", "rules": rules}}}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dashboards.yml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, "check", "rules", f)
}

// dashboardQueries are the PromQL queries of every dashboard in grafana/:
// panel targets and template variables.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("grafana/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in grafana/ (%v)", err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range d.Panels {
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", f, p.Title)
			}
			for _, tg := range p.Targets {
				out = append(out, tg.Expr)
			}
		}
	}
	return out
}

// metricName matches the names of series Gangway serves in PromQL text:
// its own and the dcgm-exporter ones. Recording-rule outputs (gangway:…)
// contain colons and are not matched.
var metricName = regexp.MustCompile(`\b(gangway_[a-z0-9_]+|DCGM_FI_[A-Z0-9_]+)\b`)

// usedMetrics are the metric names the dashboards and the rule files read
// (everything in them, template variables and annotations included), and
// the recording-rule outputs they read.
func usedMetrics(t *testing.T) (served, recorded map[string][]string) {
	t.Helper()
	served, recorded = map[string][]string{}, map[string][]string{}
	files, _ := filepath.Glob("grafana/*.json")
	files = append(files, ruleFiles(t)...)
	rec := regexp.MustCompile(`\bgangway:[a-z0-9_:]+\b`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range metricName.FindAllString(string(b), -1) {
			served[m] = append(served[m], f)
		}
		for _, m := range rec.FindAllString(string(b), -1) {
			recorded[m] = append(recorded[m], f)
		}
	}
	return served, recorded
}

// TestRecordedRulesDefined checks that every recording-rule output the
// dashboards and alerts read is recorded by a rule file.
func TestRecordedRulesDefined(t *testing.T) {
	_, recorded := usedMetrics(t)
	defined := map[string]bool{}
	for _, f := range ruleFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`record:\s*(\S+)`).FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
	}
	for name, files := range recorded {
		if !defined[name] {
			t.Errorf("%s is read by %v but no rule records it", name, slices.Compact(files))
		}
	}
}

// scrapeNames returns the metric names addr's /metrics serves.
func scrapeNames(t *testing.T, addr string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// TestMetricsServed starts the whole dev system (real Temporal and
// redis-server, the server with a fake spot cloud and a team budget, one
// node whose agent serves its GPU metrics), runs a job, and checks that
// every metric the dashboards and rules read is served by the server or
// the agent: a histogram by its _bucket, _sum and _count series.
//
// The GPU readings are set on the synthetic GPUs (a real one reports them
// through NVML) and one application Xid is injected, since fault counters
// are labelled by the fault's kind and get their series with the first.
func TestMetricsServed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	node := agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 1, GPUs: 4, Model: "H100"}})[0]
	gpus := gpuinfo.NewSynthetic(node.GPUs)
	for _, g := range node.GPUs {
		gpus.SetUtilization(g.Index, 0.5)
		gpus.SetReadings(g.Index, gpuinfo.Sample{SMActivity: 0.4, MemUsedBytes: 1 << 30, TempCelsius: 45, PowerWatts: 300})
	}
	agentReg := metrics.NewProcessRegistry()
	log := slog.New(slog.DiscardHandler)
	agentAddr, stopAgentMetrics, err := metrics.Serve("127.0.0.1:0", agentReg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stopAgentMetrics()

	st, err := fullstack.Start(ctx, fullstack.Options{
		Dir: t.TempDir(), Headless: true,
		Cloud: func(ctx context.Context, hooks fullstack.FakeHooks) (*fullstack.Cloud, error) {
			f, err := fake.New(fake.Options{Pools: []fake.Pool{{Name: "a100-spot", Zone: "z", InstanceType: "a100x8",
				GPUModel: "A100", GPUs: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 12}},
				OnRunning: hooks.OnRunning, OnNotice: hooks.OnNotice, OnTerminated: hooks.OnTerminated})
			if err != nil {
				return nil, err
			}
			reg, err := cloud.NewRegistry([]providers.Provider{f}, cloud.RegistryOptions{})
			if err != nil {
				return nil, err
			}
			return &fullstack.Cloud{Registry: reg, Fakes: []*fake.Provider{f}}, nil
		},
		Server: &fullstack.ServerOptions{TeamLimits: map[string]accounting.TeamLimit{"nlp": {MonthlyBudget: 100}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := st.StartAgent(agent.Config{Node: node, HeartbeatInterval: 200 * time.Millisecond,
		GPU: agent.GPUConfig{Source: gpus, Metrics: metrics.NewGPU(agentReg), SampleInterval: 200 * time.Millisecond}})
	defer a.Stop()
	if err := st.WaitForNodes(ctx, 1); err != nil {
		t.Fatal(err)
	}
	gpus.InjectXid(3, 13) // an application Xid: counted, nothing fenced

	cl := client.New(jobs.New(st.TemporalClient), st.View)
	spec := gangway.JobSpec{Name: "metrics-job", Team: "nlp", Command: []string{"/bin/sh", "-c", "sleep 3"},
		Gang: gangway.Gang{Replicas: 1, GPUsPerReplica: 1}}
	if _, err := cl.Submit(ctx, spec, client.SubmitOptions{Timing: workflows.Timing{StartTimeout: 30 * time.Second}}); err != nil {
		t.Fatalf("submit: %v", err)
	}
	served := map[string]bool{}
	scrape := func() {
		for _, addr := range []string{st.MetricsAddr, agentAddr} {
			for n := range scrapeNames(t, addr) {
				served[n] = true
			}
		}
	}
	// Allocation gauges exist while the job runs; usage counters from its
	// end.
	for !served["gangway_gpus_allocated"] {
		select {
		case <-ctx.Done():
			t.Fatal("the job never showed in gangway_gpus_allocated")
		case <-time.After(200 * time.Millisecond):
		}
		scrape()
	}
	res, err := cl.Result(ctx, "metrics-job")
	if err != nil || res.Phase != gangway.PhaseSucceeded {
		t.Fatalf("job ended %s (%v), want Succeeded", res.Phase, err)
	}
	scrape()

	used, _ := usedMetrics(t)
	var missing []string
	for name, files := range used {
		if served[name] || served[name+"_bucket"] && served[name+"_sum"] && served[name+"_count"] {
			continue
		}
		missing = append(missing, fmt.Sprintf("%s (read by %s)", name, strings.Join(slices.Compact(files), ", ")))
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("not served by the running stack: %s", m)
	}
	t.Logf("%d metric names read by the dashboards and rules, all served: %v", len(used), len(missing) == 0)
}
