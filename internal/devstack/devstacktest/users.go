package devstacktest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// UnixUsers creates Unix users for a test of task isolation, each with a
// group of its own and no home directory, named prefix-<n>-<pid> so that
// parallel test binaries do not collide, and deletes them when the test
// ends. It needs root and useradd: without them the test is skipped (the
// isolation it would check cannot be set up), saying so.
func UnixUsers(t testing.TB, prefix string, n int) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("devstacktest: running tasks as other Unix users needs root; run this test as root to check task isolation")
	}
	useradd, err := exec.LookPath("useradd")
	if err != nil {
		t.Skipf("devstacktest: useradd not found (%v); task isolation is not checked", err)
	}
	userdel := filepath.Join(filepath.Dir(useradd), "userdel")
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-%d-%d", prefix, i, os.Getpid())
		out, err := exec.Command(useradd, "--no-create-home", "--user-group", "--shell", "/bin/sh", name).CombinedOutput()
		if err != nil {
			t.Fatalf("devstacktest: useradd %s: %v: %s", name, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command(userdel, name).CombinedOutput(); err != nil {
				t.Errorf("devstacktest: userdel %s: %v: %s", name, err, out)
			}
		})
		names = append(names, name)
	}
	return names
}

// Traversable makes dir and every folder above it that a test created
// (t.TempDir makes them 0700) passable by other users, as /var/lib is for
// an agent's data directory: 0711, listable by none but their owner.
func Traversable(t testing.TB, dir string) {
	t.Helper()
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatalf("devstacktest: %v", err)
		}
		if fi.Mode().Perm()&0o011 == 0o011 {
			continue
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o711); err != nil {
			t.Fatalf("devstacktest: %v", err)
		}
	}
}
