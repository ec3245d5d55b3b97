package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Off a terminal the bar prints a line per tenth, not per update.
func TestProgressBarLines(t *testing.T) {
	var buf bytes.Buffer
	b := NewProgressBar(&buf, "fgd", "arrivals")
	for i := 0; i <= 100; i++ {
		b.Update(i, 100)
	}
	b.Done()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 11 || !strings.HasPrefix(lines[10], "fgd: 100% (100/100 arrivals") {
		t.Errorf("got %d lines, last %q; want 11 ending at 100%%", len(lines), lines[len(lines)-1])
	}
}

// A relative default is found from a subdirectory of the project root.
func TestFindTrace(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"go.mod", "traces/a.csv"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sub := filepath.Join(root, "cmd", "x")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	if got, want := FindTrace("traces/a.csv"), filepath.Join(root, "traces/a.csv"); got != want {
		t.Errorf("FindTrace = %q, want %q", got, want)
	}
	if got := FindTrace("traces/missing.csv"); got != "traces/missing.csv" {
		t.Errorf("FindTrace(missing) = %q, want it as given", got)
	}
}
