package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
)

// FuzzLoadConfig: a server or agent config file of any content loads and
// validates with an error or not at all, never a panic or a hang.
func FuzzLoadConfig(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "gangway.example.yaml")); err == nil {
		f.Add(data)
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
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "gangway.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var cfg Config
		fs := pflag.NewFlagSet("fuzz", pflag.ContinueOnError)
		if err := Load(fs, &cfg, path); err != nil {
			return
		}
		_ = cfg.Validate(true, false)
		_ = cfg.Validate(false, true)
		_ = cfg.Validate(false, false)
	})
}
