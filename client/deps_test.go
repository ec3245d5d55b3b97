package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoInternalDeps: a program outside this module can build the client,
// so nothing it imports, directly or not, may be under internal/.
func TestNoInternalDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "/internal/") && strings.HasPrefix(p, "github.com/gangwayhq/gangway/") {
			t.Errorf("client depends on %s", p)
		}
	}
}
