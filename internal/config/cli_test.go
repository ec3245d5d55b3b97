package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestCLIToken: the token comes from --token, else the token file's first
// line; a missing default file is no token, a missing named one an error.
func TestCLIToken(t *testing.T) {
	for _, k := range CLIEnvNames {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("gw_fromfile\n# a comment\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GANGWAY_TOKEN_FILE", file)
	var c CLIConfig
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	BindCLIFlags(fs, &c)
	if c.API != DefaultAPI || c.TokenFile != file {
		t.Errorf("defaults: %+v", c)
	}
	if tok, err := c.ResolveToken(); err != nil || tok != "gw_fromfile" {
		t.Errorf("from the file: %q, %v", tok, err)
	}
	if err := fs.Parse([]string{"--token", "gw_flag"}); err != nil {
		t.Fatal(err)
	}
	if tok, err := c.ResolveToken(); err != nil || tok != "gw_flag" {
		t.Errorf("--token: %q, %v", tok, err)
	}
	c = CLIConfig{TokenFile: filepath.Join(dir, "missing")}
	if _, err := c.ResolveToken(); err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Errorf("a missing named file: %v", err)
	}
	c = CLIConfig{CA: file}
	if _, err := c.TLS(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA file without a certificate: %v", err)
	}
}
