package main

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway/internal/api"
	"github.com/gangwayhq/gangway/internal/metrics"
)

// docFiles are the documents the docs test reads, from the repository
// root.
func docFiles(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..")
	files := []string{filepath.Join(root, "README.md"), filepath.Join(root, "deploy", "README.md"), filepath.Join(root, "examples", "README.md")}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append(files, more...)
}

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	fence    = regexp.MustCompile("(?s)```(?:sh|shell|bash|console)\n(.*?)```")
)

// documentedCommands returns every gangway command line the text shows:
// each inline code span that starts with "gangway " and each line of a
// sh/shell/bash/console code block that does (after an optional "$ ",
// "bin/" or "./bin/").
func documentedCommands(text string) []string {
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		s = strings.TrimPrefix(s, "$ ")
		for _, p := range []string{"./bin/", "bin/"} {
			s = strings.TrimPrefix(s, p)
		}
		if strings.HasPrefix(s, "gangway ") {
			out = append(out, s)
		}
	}
	for _, m := range fence.FindAllStringSubmatch(text, -1) {
		for line := range strings.Lines(m[1]) {
			add(line)
		}
	}
	for _, m := range codeSpan.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		add(m[1])
	}
	return out
}

// checkCommand resolves line in the command tree: the words after
// "gangway" name subcommands while the command has them; every --flag
// (up to "=") and -x shorthand must be one of the command's own or
// inherited flags. The line ends at a shell operator (|, ;, &&, >, #).
// A word that lists alternatives ("fgd|trace") must name subcommands
// each.
func checkCommand(root *cobra.Command, line string) string {
	words := strings.Fields(line)[1:]
	cmd := root
	pathDone := false
	for _, w := range words {
		if slices.Contains([]string{"|", ";", "&&", "||", ">", "2>", "#"}, w) || strings.HasPrefix(w, "#") {
			break
		}
		if !pathDone && !strings.HasPrefix(w, "-") && cmd.HasSubCommands() {
			alts := strings.Split(w, "|")
			var next *cobra.Command
			for _, alt := range alts {
				sub := findSub(cmd, alt)
				if sub == nil {
					if cmd.Runnable() && len(alts) == 1 {
						break
					}
					return "no command " + cmd.CommandPath() + " " + alt
				}
				next = sub
			}
			if next != nil {
				cmd = next
				continue
			}
		}
		pathDone = true
		switch {
		case strings.HasPrefix(w, "--"):
			name, _, _ := strings.Cut(strings.TrimPrefix(w, "--"), "=")
			name = strings.TrimRight(name, ".,:)")
			if name == "" || name == "help" {
				continue
			}
			if cmd.Flags().Lookup(name) == nil && cmd.PersistentFlags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
				return cmd.CommandPath() + " has no flag --" + name
			}
		case len(w) == 2 && w[0] == '-' && w[1] != '-':
			if w[1] != 'h' && cmd.Flags().ShorthandLookup(w[1:]) == nil && cmd.PersistentFlags().ShorthandLookup(w[1:]) == nil &&
				cmd.InheritedFlags().ShorthandLookup(w[1:]) == nil {
				return cmd.CommandPath() + " has no flag " + w
			}
		}
	}
	return ""
}

func findSub(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || slices.Contains(c.Aliases, name) {
			return c
		}
	}
	return nil
}

// TestDocsMatchCommands: every gangway command and flag that README.md,
// deploy/README.md, examples/README.md and docs/*.md show (documentedCommands)
// exists in the CLI (checkCommand).
func TestDocsMatchCommands(t *testing.T) {
	root := newRootCmd()
	root.InitDefaultCompletionCmd()
	n := 0
	for _, f := range docFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range documentedCommands(string(data)) {
			n++
			if problem := checkCommand(root, line); problem != "" {
				t.Errorf("%s: `%s`: %s", filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), line, problem)
			}
		}
	}
	t.Logf("%d documented command lines checked", n)
}

// metricNames is every metric the metrics package registers, by the
// names its collectors describe. A new constructor in internal/metrics
// belongs here too.
func metricNames(t *testing.T) map[string]bool {
	t.Helper()
	rec := &recorder{Registry: prometheus.NewRegistry()}
	metrics.New(rec)
	metrics.NewUsage(rec)
	metrics.NewCloud(rec)
	metrics.NewLifecycle(rec)
	metrics.NewCheckpoints(rec)
	metrics.NewTaskLogs(rec)
	metrics.NewGPU(rec)
	names := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if m := fq.FindStringSubmatch(d.String()); m != nil {
				names[m[1]] = true
			}
		}
	}
	return names
}

// recorder is a registry that remembers what was registered on it.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// TestDocsMatchMetrics: every gangway_* and DCGM_FI_* metric name the documents mention
// is registered by internal/metrics (a histogram's _bucket, _sum and
// _count series count as the histogram), and every one registered is
// mentioned.
func TestDocsMatchMetrics(t *testing.T) {
	names := metricNames(t)
	if len(names) == 0 {
		t.Fatal("internal/metrics registered no metrics")
	}
	metric := regexp.MustCompile(`\b(gangway_[a-z0-9_]*[a-z0-9]|DCGM_FI_[A-Z0-9_]*[A-Z0-9])\b`)
	documented := map[string]bool{}
	for _, f := range docFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range slices.Compact(slices.Sorted(slices.Values(metric.FindAllString(string(data), -1)))) {
			base := m
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(m, suf); ok && names[b] {
					base = b
				}
			}
			if !names[base] && base != api.TokenCookie { // the cookie is no metric
				t.Errorf("%s mentions %s, which internal/metrics does not register", filepath.Base(f), m)
			}
			documented[base] = true
		}
	}
	// And the other way: an operator finds every metric in the docs
	// (deploy/README.md lists them).
	for _, n := range slices.Sorted(maps.Keys(names)) {
		if !documented[n] {
			t.Errorf("internal/metrics registers %s, which no document mentions", n)
		}
	}
}

// TestCheckCommand: the docs test's rule catches what it should.
func TestCheckCommand(t *testing.T) {
	root := newRootCmd()
	root.InitDefaultCompletionCmd()
	tests := map[string]string{
		"gangway submit examples/single-gpu.yaml --wait": "",
		"gangway status JOB -o json":                     "",
		"gangway replay fgd|trace --output json":         "",
		"gangway completion bash > /etc/x --nope":        "",
		"gangway --config gangway.yaml server":           "",
		"gangway --nope server":                          "gangway has no flag --nope",
		"gangway submit --nope":                          "gangway submit has no flag --nope",
		"gangway nosuch":                                 "no command gangway nosuch",
		"gangway replay fgd|nosuch":                      "no command gangway replay nosuch",
		"gangway logs -x":                                "gangway logs has no flag -x",
	}
	for line, want := range tests {
		if got := checkCommand(root, line); got != want {
			t.Errorf("checkCommand(%q) = %q, want %q", line, got, want)
		}
	}
}
