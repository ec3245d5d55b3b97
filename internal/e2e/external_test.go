package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/devstack"
)

// externalProgram is a program in its own module that knows Gangway only
// through client and the root package: it submits a job, follows it to its
// end and prints what it saw.
const externalProgram = `package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{TemporalHostPort: os.Getenv("GW_TEMPORAL"), Namespace: os.Getenv("GW_NAMESPACE")})
	if err != nil {
		return err
	}
	defer c.Close()

	spec := gangway.JobSpec{Name: "from-outside", Team: "ml",
		Command: []string{os.Getenv("GW_TRAIN"), "demo-train"}, Args: []string{"--steps", "5", "--step-time", "100ms"},
		Gang: gangway.Gang{Replicas: 1, GPUsPerReplica: 2}}
	bad := spec
	bad.Gang.Replicas = 0
	if _, err := c.Submit(ctx, bad, client.SubmitOptions{}); err != nil {
		fmt.Println("bad spec rejected")
	}
	id, err := c.Submit(ctx, spec, client.SubmitOptions{})
	if err != nil {
		return err
	}
	fmt.Println("submitted", id)
	if _, err := c.Submit(ctx, spec, client.SubmitOptions{}); errors.Is(err, client.ErrJobExists) {
		fmt.Println("second submit refused")
	}
	last := gangway.Phase("")
	for {
		st, err := c.Status(ctx, id)
		if err != nil {
			return err
		}
		if st.Phase != last {
			fmt.Println("phase", st.Phase)
			last = st.Phase
		}
		if st.Phase.Terminal() {
			fmt.Printf("ended %s after %d attempt(s), GPU-seconds recorded: %t\n", st.Phase, st.Attempt, st.GPUSeconds > 0)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	res, err := c.Result(ctx, id)
	if err != nil {
		return err
	}
	fmt.Println("result", res.Phase)
	jobs, err := c.List(ctx)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		fmt.Println("listed", j.JobID, j.Team, j.GPUs)
	}
	if _, err := c.Status(ctx, "no-such-job"); errors.Is(err, client.ErrJobNotFound) {
		fmt.Println("unknown job not found")
	}
	if _, err := c.Logs(ctx, id, "", 0); errors.Is(err, client.ErrNoView) {
		fmt.Println("logs need a view")
	}
	return nil
}
`

// TestExternalModuleClient builds a program in a separate Go module (a
// replace pointing at this checkout) that imports only client and the root
// package, and runs it against a real stack: Temporal dev server,
// redis-server, a gangway server (worker and dispatch) and an agent. The
// program submits a job and follows it to Succeeded.
func TestExternalModuleClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and builds a separate module")
	}
	if _, err := devstack.FindTemporal(); errors.Is(err, devstack.ErrTemporalNotFound) {
		t.Skip("no temporal CLI (bin/temporal): run make temporal to build it")
	}
	root, err := filepath.Abs(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	prog := buildExternal(t, root)

	s := newStack(t)
	ctx := t.Context()
	s.startAgent(agent.FakeNode("node-0", "onprem", "127.0.0.1", 8, "H100"), agent.Config{})
	if err := s.WaitForNodes(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.startServer()

	cmd := exec.CommandContext(ctx, prog)
	cmd.Env = append(os.Environ(), "GW_TEMPORAL="+s.Temporal.Addr, "GW_NAMESPACE="+s.Temporal.Namespace, "GW_TRAIN="+s.bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("external program: %v\n%s", err, out)
	}
	// Which phases the program sees between polls depends on timing; that
	// it sees the job end Succeeded does not.
	var phases []string
	var rest strings.Builder
	for _, line := range strings.SplitAfter(string(out), "\n") {
		if p, ok := strings.CutPrefix(line, "phase "); ok {
			phases = append(phases, strings.TrimSpace(p))
			continue
		}
		rest.WriteString(line)
	}
	want := `bad spec rejected
submitted from-outside
second submit refused
ended Succeeded after 1 attempt(s), GPU-seconds recorded: true
result Succeeded
listed from-outside ml 2
unknown job not found
logs need a view
`
	if diff := cmp.Diff(want, rest.String()); diff != "" {
		t.Errorf("external program output (-want +got):\n%s\nwhole output:\n%s", diff, out)
	}
	if len(phases) == 0 || phases[len(phases)-1] != string(gangway.PhaseSucceeded) {
		t.Errorf("phases seen %v, want them to end Succeeded", phases)
	}
}

// buildExternal writes externalProgram into a new module that requires
// Gangway v0.0.0 replaced by the checkout at root, with the checkout's
// go.sum so nothing is downloaded, and builds it.
func buildExternal(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	// This module's go.mod under another module path: with its go version
	// and every requirement of this one, the external module's graph is
	// already complete, as this one's is, and the build (offline) needs no
	// go.mod this one's build never loaded (an old module's own
	// requirements, unpruned).
	const self = "module github.com/gangwayhq/gangway\n"
	if !strings.HasPrefix(string(data), self) {
		t.Fatalf("go.mod does not start with %q", self)
	}
	gomod := "module example.com/gwclient\n" + strings.TrimPrefix(string(data), self) + "\n" +
		"require github.com/gangwayhq/gangway v0.0.0\n\n" +
		"replace github.com/gangwayhq/gangway => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(externalProgram)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "gwclient")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("build the external module: %v\n%s", err, out.String())
	}
	// Built from client and the root package alone: nothing internal.
	list := exec.Command("go", "list", "-deps", ".")
	list.Dir, list.Env = dir, cmd.Env
	deps, err := list.Output()
	if err != nil {
		t.Fatalf("go list -deps in the external module: %v", err)
	}
	for _, p := range strings.Fields(string(deps)) {
		if strings.HasPrefix(p, "github.com/gangwayhq/gangway/internal/") {
			t.Errorf("the external program depends on %s", p)
		}
	}
	return bin
}
