package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// FuzzLoadConfig: a server or agent config file of any content loads and
// validates with an error or not at all, never a panic or a hang; a load
// error names the file and every validation problem names its field.
//
// It runs load on the file's bytes: writing each input to a file cost more
// than the rest of an execution, and the documented example, whose 24 KB
// are mostly comments, took the whole minimization time of every input
// the fuzzer found interesting. The example seeds with its comments and
// blank lines dropped: every field, a fifteenth of the size.
func FuzzLoadConfig(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "gangway.example.yaml")); err == nil {
		f.Add(stripComments(data))
	}
	for _, s := range []string{
		"",
		"server:\n  dispatchInterval: 500ms\n",
		"redis:\n  url: redis://:pw@127.0.0.1:6379/0\n",
		"agent:\n  fakeGPUs: 8xH100\n  heartbeatInterval: -1s\n",
		"cloud:\n  providers:\n  - type: fake\n    pools: [{name: p, gpus: 8}]\n",
		"jobs:\n  users: {ml: nobody}\n  allowEnv: [LD_PRELOAD]\n",
		"server: [1, 2\n",
		"api:\n  addr: ':8080'\n  oidc: {issuer: 'http://x', audience: a}\n",
		"server:\n  placement:\n    defrag: {enabled: true, windows: ['22:00-06:00', '25:00-x'], timezone: Mars/Base}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cfg Config
		fs := pflag.NewFlagSet("fuzz", pflag.ContinueOnError)
		if err := load(fs, &cfg, "gangway.yaml", data); err != nil {
			if !strings.HasPrefix(err.Error(), "config file gangway.yaml: ") && !strings.HasPrefix(err.Error(), "GANGWAY_") {
				t.Fatalf("load error %q names neither the file nor a variable", err)
			}
			return
		}
		for _, cmd := range [][2]bool{{true, false}, {false, true}, {false, false}} {
			checkFieldErrors(t, cfg.Validate(cmd[0], cmd[1]))
		}
	})
}

// fieldRE is how every validation problem starts: the field's YAML path.
var fieldRE = regexp.MustCompile(`^(temporal|redis|log|server|agent|checkpoint|ledger|cloud|api|jobs)\b[^:]*: `)

func checkFieldErrors(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("Validate error %q is not a list of field problems", err)
	}
	for _, e := range joined.Unwrap() {
		if !fieldRE.MatchString(e.Error()) {
			t.Fatalf("validation problem %q does not start with its field", e)
		}
	}
}

// stripComments drops a YAML file's comment and blank lines.
func stripComments(data []byte) []byte {
	var out []byte
	for line := range bytes.Lines(data) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
		}
	}
	return out
}
